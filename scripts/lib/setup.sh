# Shared by scripts/demo and scripts/test: install what this project needs on a fresh
# Debian machine (PostgreSQL server binaries, a virtual environment, the package).

PG_PACKAGE="postgresql"

have_postgres_binaries() {
    [ -n "${SLOT_EXPIRATION_PG_BINDIR:-}" ] && [ -x "$SLOT_EXPIRATION_PG_BINDIR/initdb" ] && return 0
    command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ] && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "setup: need root to run: $*" >&2; return 1
    fi
}

ensure_postgres() {
    if have_postgres_binaries && { [ "$(id -u)" -ne 0 ] || id postgres >/dev/null 2>&1; }; then
        return 0
    fi
    echo "setup: installing PostgreSQL server binaries (apt-get install $PG_PACKAGE)" >&2
    # Only the binaries are wanted: no cluster, no system service left running.
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
        as_root mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null
    fi
    as_root apt-get update -qq
    # Keep our createcluster.conf over the package's (no prompt, no main cluster).
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$PG_PACKAGE" >/dev/null
}

# Real tools the test suite checks the product against: promtool and a Prometheus
# server (metrics, alert rules), pgbouncer (a pooler in transaction mode).
TEST_TOOLS_PACKAGES="prometheus pgbouncer"

ensure_test_tools() {
    local missing=""
    command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || missing="prometheus"
    command -v pgbouncer >/dev/null 2>&1 || missing="$missing pgbouncer"
    [ -z "$missing" ] && return 0
    echo "setup: installing test tools (apt-get install $TEST_TOOLS_PACKAGES)" >&2
    as_root apt-get update -qq
    # Only the binaries: no service is started (policy-rc.d refuses it), none is left running.
    as_root sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $TEST_TOOLS_PACKAGES >/dev/null
    as_root rm -f /usr/sbin/policy-rc.d
}

ensure_venv() {  # $1: what to install, e.g. "." or ".[dev]"
    local python="${PYTHON:-python3}" stamp=".venv/.installed"
    local want
    want="$1 $(sha256sum < pyproject.toml | cut -c1-16)"
    if [ ! -x .venv/bin/python ]; then
        "$python" -m venv .venv 2>/dev/null || {
            as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            "$python" -m venv .venv
        }
    fi
    local have
    have="$(cat "$stamp" 2>/dev/null || true)"
    # The development install holds everything the plain one does.
    if [ "$have" != "$want" ] && [ "$have" != "${want/#. /.[dev] }" ]; then
        echo "setup: installing the package into .venv ($1)" >&2
        .venv/bin/python -m pip install -q --upgrade pip >/dev/null
        .venv/bin/python -m pip install -q -e "$1"
        echo "$want" > "$stamp"
    fi
}
