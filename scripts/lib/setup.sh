# Shared by scripts/demo, scripts/test and scripts/lock: install what this project needs on a fresh
# Debian machine (PostgreSQL server binaries, a virtual environment from the lock files, the package).

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
# server (metrics, alert rules), pgbouncer (a pooler in transaction mode), systemd-analyze
# (the systemd unit of the deploy kit), faketime (a worker whose clock runs ahead),
# Chromium and its WebDriver (the `ui` page in a real headless browser; Selenium drives
# Debian's builds, nothing downloads a browser), and the server extensions (below).
TEST_TOOLS_PACKAGES="prometheus pgbouncer systemd faketime chromium chromium-driver"

# The major version of the newest Debian server binaries (the embedded server's choice).
postgres_major() {
    local initdb
    initdb="$(compgen -G "/usr/lib/postgresql/*/bin/initdb" | sort -V | tail -1)"
    basename "$(dirname "$(dirname "$initdb")")"
}

ensure_test_tools() {
    local missing=""
    command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || missing="prometheus"
    command -v pgbouncer >/dev/null 2>&1 || missing="$missing pgbouncer"
    command -v systemd-analyze >/dev/null 2>&1 || missing="$missing systemd"
    command -v faketime >/dev/null 2>&1 || missing="$missing faketime"
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
    command -v chromedriver >/dev/null 2>&1 || missing="$missing chromium-driver"
    if [ -n "$missing" ]; then apt_install "test tools" $TEST_TOOLS_PACKAGES; fi
    ensure_server_extensions
}

# The server extensions the suite and the benchmark start PostgreSQL with: pg_partman (a
# calendar partitioned by month, as pg_partman keeps it) and pg_cron (the single statement run
# as a cron job, the benchmark's peer in section g), both from Debian.
ensure_server_extensions() {
    local major packages=""
    major="$(postgres_major)"
    [ -e "/usr/share/postgresql/$major/extension/pg_partman.control" ] \
        || packages="postgresql-$major-partman"
    [ -e "/usr/share/postgresql/$major/extension/pg_cron.control" ] \
        || packages="$packages postgresql-$major-cron"
    if [ -n "$packages" ]; then apt_install "server extensions" $packages; fi
}

apt_install() {  # $1: what for (said on stderr), then the packages
    local what="$1"
    shift
    echo "setup: installing $what (apt-get install $*)" >&2
    as_root apt-get update -qq
    # Only the binaries: no service is started (policy-rc.d refuses it), none is left running.
    as_root sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" >/dev/null
    as_root rm -f /usr/sbin/policy-rc.d
}

# What ./scripts/image needs: podman with the runc runtime, and mmdebstrap for a local Debian
# base when no registry can be reached.
IMAGE_TOOLS_PACKAGES="podman runc mmdebstrap"

ensure_image_tools() {
    command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 \
        && command -v mmdebstrap >/dev/null 2>&1 && return 0
    echo "setup: installing the image tools (apt-get install $IMAGE_TOOLS_PACKAGES)" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $IMAGE_TOOLS_PACKAGES >/dev/null
}

# podman's own flags for this machine, one a line: the runc runtime when installed (crun, the
# default where both are, fails under some cgroup setups), and open-files and process limits
# within this shell's hard limits. podman's defaults may exceed them, and the runtime then
# refuses to start the container ("error setting rlimit"); seen here too: a process limit above
# kernel.pid_max is refused, so it is capped there.
podman_machine_args() {
    local files procs pids
    if command -v runc >/dev/null 2>&1; then printf '%s\n' --runtime runc; fi
    files="$(ulimit -Hn)"
    if [ "$files" != unlimited ]; then printf '%s\n' --ulimit "nofile=$files:$files"; fi
    procs="$(ulimit -Hu)"
    pids="$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo "$procs")"
    if [ "$procs" = unlimited ] || [ "$pids" -lt "$procs" ]; then procs="$pids"; fi
    printf '%s\n' --ulimit "nproc=$procs:$procs"
}

# The test suite's name for the image it built: the version's tag plus this checkout's, so that
# suites of two checkouts on one machine never test each other's image.
suite_image_name() {
    echo "localhost/slot-expiration:$(project_version)-suite-$(checkout_id)"
}

checkout_id() {  # this checkout's folder, as a short name two checkouts never share
    pwd -P | sha256sum | cut -c1-8
}

# A base image with Debian's Python 3, made once from Debian packages through this machine's
# own apt sources (no registry, no package host named here); prints its name.
debian_base() {
    local codename sources name
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    name="localhost/slot-expiration-base:${codename:-debian}-python3"
    if podman image exists "$name"; then
        echo "image: reusing the local Debian base $name" >&2
        echo "$name"
        return 0
    fi
    sources=/etc/apt/sources.list.d/debian.sources
    [ -f "$sources" ] || sources=/etc/apt/sources.list
    if [ -z "$codename" ] || [ ! -f "$sources" ] || ! command -v mmdebstrap >/dev/null 2>&1; then
        echo "image: no base: this machine is not Debian with mmdebstrap; set PYTHON_IMAGE to a" \
            "Python 3.11 image in podman's store" >&2
        return 1
    fi
    echo "image: making $name with mmdebstrap ($codename, minbase, python3; mirror: $sources)" >&2
    mmdebstrap --quiet --variant=minbase \
        --include=python3,python3-venv,python-is-python3,ca-certificates \
        "$codename" - "$sources" \
        | podman import --quiet --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
            - "$name" >/dev/null
    echo "$name"
}

# The lock files (./scripts/lock writes them): every package pinned and hashed. ensure_venv
# installs from them only, so every machine gets the same versions of everything.
BUILD_LOCK="requirements/build.txt"

lock_for() {  # $1: "." or ".[dev]"
    case "$1" in
        ".") echo "requirements/runtime.txt" ;;
        ".[dev]") echo "requirements/dev.txt" ;;
        *) echo "setup: ensure_venv takes . or .[dev], not $1" >&2; return 2 ;;
    esac
}

install_stamp() {  # $1: "." or ".[dev]": what was installed, from which sources
    local lock
    lock="$(lock_for "$1")" || return
    echo "$1 $(cat pyproject.toml "$BUILD_LOCK" "$lock" | sha256sum | cut -c1-16)"
}

new_venv() {
    local python="${PYTHON:-python3}"
    rm -rf "$1"
    "$python" -m venv "$1" 2>/dev/null || {
        as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        "$python" -m venv "$1"
    }
}

ensure_venv() {  # $1: whose dependencies: "." (the package's) or ".[dev]" (with the dev extra);
                 # $2: the environment's folder (.venv unless given)
    local venv="${2:-.venv}" lock want have
    local stamp="$venv/.installed"
    lock="$(lock_for "$1")" || return
    want="$(install_stamp "$1")"
    have="$(cat "$stamp" 2>/dev/null || true)"
    # The development install holds everything the plain one does.
    if [ "$have" = "$want" ] || { [ "$1" = "." ] && [ "$have" = "$(install_stamp ".[dev]")" ]; }; then
        return 0
    fi
    echo "setup: installing the locked dependencies into a new $venv from $lock" >&2
    # A new environment each time: nothing is left over from an older lock.
    new_venv "$venv"
    "$venv/bin/python" -m pip install -q --require-hashes -r "$BUILD_LOCK"
    "$venv/bin/python" -m pip install -q --require-hashes -r "$lock"
    # Python 3.11's venv brings a setuptools the locks do not name; no build uses it.
    "$venv/bin/python" -m pip uninstall -q -y setuptools 2>/dev/null || true
    echo "$want" > "$stamp"
}

# The source tree's environment (./scripts/test --fast): the locked development dependencies,
# and the package installed editable, so that it imports src/ itself: no wheel to build after
# a change. Apart from .venv, which holds the wheel the full suite tests.
SOURCE_VENV=".venv-src"

ensure_source_venv() {
    local marker="$SOURCE_VENV/.editable"
    ensure_venv ".[dev]" "$SOURCE_VENV"
    # ensure_venv makes a new environment whenever pyproject.toml changes (its metadata, the
    # version included, is then installed again with the package).
    if [ ! -f "$marker" ]; then
        echo "setup: installing the package editable into $SOURCE_VENV (it imports src/)" >&2
        "$SOURCE_VENV/bin/python" -m pip install -q --no-deps --no-build-isolation --editable .
        touch "$marker"
    fi
}

# Every wheel these lock files pin, for CPython 3.11 on this machine's architecture, downloaded
# once per lock content into .cache/wheelhouse/ (each file's hash checked against the lock);
# prints the folder. pip installs from it with --no-index --find-links (the image, the test of
# an upgrade from an older release).
wheelhouse() {  # the lock files
    local house
    house=".cache/wheelhouse/$(cat "$@" | sha256sum | cut -c1-16)-$(uname -m)"
    if [ ! -f "$house/.complete" ]; then
        echo "setup: downloading the locked wheels into $house" >&2
        rm -rf "$house"
        mkdir -p "$house"
        for lock in "$@"; do
            .venv/bin/python -m pip download -q --disable-pip-version-check --require-hashes \
                --only-binary=:all: --no-deps --python-version 3.11 --implementation cp \
                --abi cp311 --abi abi3 --abi none --dest "$house" -r "$lock" >&2
        done
        touch "$house/.complete"
    fi
    echo "$house"
}

project_version() {
    "${PYTHON:-python3}" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])'
}

# The time a build of this checkout stamps on its files: its commit's (SOURCE_DATE_EPOCH when
# set, as reproducible builds define it), so that two builds of one commit are the same bytes.
source_date_epoch() {
    if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then echo "$SOURCE_DATE_EPOCH"; return; fi
    git log -1 --format=%ct 2>/dev/null || echo 315532800  # not a git checkout: 1980-01-01
}

# The package as users get it: a wheel built from this checkout by the locked build backend
# (no network, no build isolation), never the source tree. Prints the wheel's path.
build_wheel() {
    local wheel="dist/slot_expiration-$(project_version)-py3-none-any.whl"
    rm -f "$wheel"
    SOURCE_DATE_EPOCH="$(source_date_epoch)" \
        .venv/bin/python -m pip wheel -q --no-deps --no-build-isolation --wheel-dir dist . >&2
    [ -f "$wheel" ] || { echo "setup: the build made no $wheel" >&2; return 1; }
    echo "$wheel"
}

install_wheel() {  # $1: the wheel; installed non-editable over whatever .venv held
    # Everything it needs is installed already: the package itself adds nothing unlocked.
    .venv/bin/python -m pip install -q --no-deps --force-reinstall "$1"
    if ! .venv/bin/python -m pip check >/dev/null 2>&1; then
        .venv/bin/python -m pip check >&2 || true
        echo "setup: the lock files no longer satisfy pyproject.toml: run ./scripts/lock" >&2
        return 1
    fi
}

ensure_package() {  # the wheel of this checkout, built and installed into .venv; prints its path
    local wheel
    wheel="$(build_wheel)" || return
    install_wheel "$wheel" || return
    echo "$wheel"
}

build_requirements() {  # pyproject's [build-system] requires, one a line
    "${PYTHON:-python3}" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")'
}

ensure_uv() {  # prints the path of uv (for ./scripts/lock), installed into .venv-uv/ when missing
    if [ ! -x .venv-uv/bin/uv ]; then
        echo "setup: installing uv into .venv-uv (pip install uv)" >&2
        new_venv .venv-uv >&2
        .venv-uv/bin/python -m pip install -q "uv>=0.5,<1" >&2
    fi
    echo ".venv-uv/bin/uv"
}
