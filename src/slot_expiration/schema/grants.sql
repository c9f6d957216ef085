-- `slot-expiration grant`: what a role needs, what it holds, and the GRANT and
-- REVOKE statements. Only slot_expiration.schema.grants runs them (what each role
-- needs is contract.sql's: grant_requirements). In the
-- templates, {role}, {table}, {schema} and {column} are identifiers that
-- psycopg.sql quotes, and {privilege} one keyword of a fixed list (SELECT,
-- INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER).

-- name: grant_target
-- The role named, the table's schema and owner, and why granting to it
-- would be wrong: it owns the table (or acts as its owner), is a superuser,
-- is who runs this command, or is a predefined role; or it can reach, through
-- a chain of memberships (INHERIT or not: a member may SET ROLE to each), a
-- superuser, the table's owner, or a predefined role that writes what it
-- likes (the shortest such chain, role by role). NULL role_oid: no such role.
WITH RECURSIVE reach (roleid, chain) AS (
    SELECT r.oid, ARRAY[r.rolname::text] FROM pg_roles AS r WHERE r.rolname = %(role)s
    UNION ALL
    SELECT m.roleid, reach.chain || granted.rolname::text
    FROM reach
    JOIN pg_auth_members AS m ON m.member = reach.roleid
    JOIN pg_roles AS granted ON granted.oid = m.roleid
    WHERE granted.rolname::text <> ALL (reach.chain)
),
slot_table AS (
    SELECT c.relowner, n.nspname
    FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.oid = to_regclass('availability_slots')
),
power AS (
    SELECT reach.chain, CASE WHEN g.rolsuper THEN 'superuser'
                             WHEN g.oid = t.relowner THEN 'owner'
                             ELSE 'writer' END AS kind
    FROM reach
    JOIN pg_roles AS g ON g.oid = reach.roleid
    CROSS JOIN slot_table AS t
    WHERE cardinality(reach.chain) > 1
      AND (g.rolsuper OR g.oid = t.relowner
           OR g.rolname IN ('pg_write_all_data', 'pg_write_server_files',
                            'pg_execute_server_program'))
    ORDER BY cardinality(reach.chain), reach.chain
    LIMIT 1
)
SELECT r.oid AS role_oid,
       t.nspname AS schema,
       pg_get_userbyid(t.relowner) AS owner,
       pg_has_role(current_user, t.relowner, 'MEMBER') AS we_act_as_owner,
       r.oid IS NOT NULL AND pg_has_role(r.oid, t.relowner, 'MEMBER') AS role_acts_as_owner,
       coalesce(r.rolsuper, false) AS superuser,
       r.rolname IN (current_user, session_user) AS connecting,
       -- pg_read_all_data and the like: PostgreSQL reserves the pg_ prefix for them.
       starts_with(r.rolname, 'pg_') AS predefined,
       power.chain AS chain_to_power,
       power.kind AS power
FROM slot_table AS t
LEFT JOIN pg_roles AS r ON r.rolname = %(role)s
LEFT JOIN power ON true;

-- name: role_privileges
-- Every privilege the role can use on the product's tables (UPDATE also per
-- column of availability_slots), whether it holds it directly, and the roles
-- it has it through: roles whose privileges it inherits (memberships), PUBLIC,
-- and the predefined pg_read_all_data and pg_write_all_data.
WITH target AS (
    SELECT oid FROM pg_roles WHERE rolname = %(role)s
),
relations AS (
    SELECT c.oid, c.relname::text AS relation,
           coalesce(c.relacl, acldefault('r', c.relowner)) AS acl
    FROM pg_class AS c
    WHERE c.oid IN (
        to_regclass('availability_slots'), to_regclass('slot_expiration_failures'),
        to_regclass('slot_expiration_alembic_version'), to_regclass('slot_expiration_cycles'),
        to_regclass('slot_expiration_pauses')
    )
),
asked AS (
    SELECT rel.oid, rel.relation, NULL::text AS column_name, p.privilege, rel.acl,
           NULL::aclitem[] AS column_acl
    FROM relations AS rel
    CROSS JOIN (VALUES ('SELECT'), ('INSERT'), ('UPDATE'), ('DELETE'), ('TRUNCATE'),
                       ('REFERENCES'), ('TRIGGER')) AS p (privilege)
    UNION ALL
    SELECT rel.oid, rel.relation, att.attname::text, 'UPDATE', rel.acl, att.attacl
    FROM relations AS rel
    JOIN pg_attribute AS att ON att.attrelid = rel.oid AND att.attnum > 0
                            AND NOT att.attisdropped
    WHERE rel.relation = 'availability_slots'
),
grantees AS (
    SELECT a.oid, a.relation, a.column_name, a.privilege, g.grantee
    FROM asked AS a
    CROSS JOIN LATERAL (
        SELECT e.grantee FROM aclexplode(a.acl) AS e WHERE e.privilege_type = a.privilege
        UNION
        SELECT e.grantee FROM aclexplode(a.column_acl) AS e WHERE e.privilege_type = a.privilege
    ) AS g
)
SELECT a.relation, a.column_name, a.privilege,
       EXISTS (
           SELECT FROM grantees AS g
           WHERE (g.oid, g.column_name, g.privilege) IS NOT DISTINCT FROM
                 (a.oid, a.column_name, a.privilege)
             AND g.grantee = t.oid
       ) AS direct,
       ARRAY(
           SELECT CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(g.grantee) END
           FROM grantees AS g
           WHERE (g.oid, g.column_name, g.privilege) IS NOT DISTINCT FROM
                 (a.oid, a.column_name, a.privilege)
             AND g.grantee <> t.oid
             AND (g.grantee = 0 OR pg_has_role(t.oid, g.grantee, 'USAGE'))
           UNION
           SELECT d.rolname FROM pg_roles AS d
           WHERE d.oid <> t.oid AND pg_has_role(t.oid, d.oid, 'USAGE')
             AND ((d.rolname = 'pg_read_all_data' AND a.privilege = 'SELECT')
               OR (d.rolname = 'pg_write_all_data'
                   AND a.privilege IN ('INSERT', 'UPDATE', 'DELETE')))
           ORDER BY 1
       ) AS via
FROM asked AS a
CROSS JOIN target AS t
WHERE CASE WHEN a.column_name IS NULL
           THEN has_table_privilege(t.oid, a.oid, a.privilege)
           ELSE has_column_privilege(t.oid, a.oid, a.column_name, a.privilege) END
ORDER BY a.relation, a.privilege, a.column_name NULLS FIRST;

-- name: grant_schema_usage
GRANT USAGE ON SCHEMA {schema} TO {role};

-- name: grant_table_privilege
GRANT {privilege} ON TABLE {table} TO {role};

-- name: grant_column_privilege
GRANT {privilege} ({column}) ON TABLE {table} TO {role};

-- name: revoke_table_privilege
REVOKE {privilege} ON TABLE {table} FROM {role};

-- name: revoke_column_privilege
REVOKE {privilege} ({column}) ON TABLE {table} FROM {role};

-- name: standbys_function_exists
-- Whether the function a drain reads the standbys through is there (migration
-- 0010): a schema migrated by an older release has none to grant.
SELECT to_regprocedure('slot_expiration_standbys()') IS NOT NULL;

-- name: grant_standbys_function
-- The worker's only privilege beyond the tables: the standbys' positions, read
-- with the function owner's rights, not pg_read_all_stats (migration 0010).
GRANT EXECUTE ON FUNCTION {schema}.slot_expiration_standbys() TO {role};
