#!/bin/sh
# gbrd as a Windows service, under Wine's service manager (TAP).
#
# Installs a service with Wine's sc.exe, starts it, follows its states
# until RUNNING, checks that its pipe answers, sends PARAMCHANGE, pause and
# interrogate, stops it, starts it with a broken config, sets recovery
# actions, and deletes it. tests/windows/svcctl.exe does what Wine's sc.exe
# cannot (send PARAMCHANGE, read the exit codes, wait for a state).
#
# Twice: once with tests/windows/svc-fake.exe (the real service-win.c and
# proc-win.c around a made-up gbrd body), and once with the real gbrd.exe
# and gbrctl.exe when the build has them.
#
# usage: tests/windows/test-service.sh [WINDOWS_BUILD_DIR]
#   The build dir defaults to the current one (make check runs it there).
#   $GBR_WINE names wine64 (default: wine64 on PATH, else /usr/lib/wine).
#   Each run boots a private Wine prefix (about 10 seconds) and removes it.
#   $GBR_SVC_KEEP=1 keeps it, and prints where, for a look afterwards.

build=$(cd "${1:-.}" && pwd) || exit 99
n=0
failed=0

ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'
}
skip() {
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() {
	d=$1
	shift
	if "$@"; then ok "$d"; else not_ok "$d" "${why:-}"; fi
	why=
}

wine=${GBR_WINE:-}
[ -n "$wine" ] || wine=$(command -v wine64 2>/dev/null)
[ -n "$wine" ] || [ ! -x /usr/lib/wine/wine64 ] || wine=/usr/lib/wine/wine64
if [ -z "$wine" ]; then
	echo "1..0 # SKIP no wine64 (apt-get install wine64): a Windows service needs Wine's service manager here"
	exit 0
fi
fake=$build/tests/windows/svc-fake.exe
ctl=$build/tests/windows/svcctl.exe
if [ ! -f "$fake" ] || [ ! -f "$ctl" ]; then
	echo "1..0 # SKIP $fake and svcctl.exe are not built: run make check in a --host=x86_64-w64-mingw32 build"
	exit 0
fi
wineserver=$(dirname "$wine")/wineserver
[ -x "$wineserver" ] || wineserver=$(command -v wineserver 2>/dev/null)

WINEPREFIX=$(mktemp -d "${TMPDIR:-/tmp}/gbr-svc-wine.XXXXXX") || exit 99
export WINEPREFIX
WINEDEBUG=-all
export WINEDEBUG
err=$WINEPREFIX/wine-stderr.log
keeper=
cleanup() {
	[ -n "$keeper" ] && kill "$keeper" 2>/dev/null
	[ -n "$wineserver" ] && "$wineserver" -k 2>/dev/null
	if [ "${GBR_SVC_KEEP:-0}" = 1 ]; then
		echo "# kept the Wine prefix $WINEPREFIX"
	else
		rm -rf "$WINEPREFIX"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# eventually PATTERN FILE: grep that waits up to 15 s for the line, since
# the event log's lines reach $err through another process's stderr and
# may come a moment after the state that follows them.
eventually() {
	i=0
	until grep -q "$1" "$2"; do
		i=$((i + 1))
		[ $i -gt 150 ] && return 1
		sleep 0.1
	done
}

# A path of this machine as Wine's Z: drive names it.
winpath() {
	printf 'Z:%s' "$1" | tr / '\\'
}
# Runs a Windows program; its output without the carriage returns. Its
# stderr and WINEDEBUG are the event log's: whichever program Wine starts
# services.exe for passes them on to it (a plain query that raced the
# keeper below once took services.exe, and every event went nowhere).
w() {
	WINEDEBUG=-all,+eventlog "$wine" "$@" 2>>"$err" | tr -d '\r'
}
c_drive=$WINEPREFIX/drive_c

# Wine's event log is a stub that prints each event on the debug channel
# "eventlog" of the program that reports it; services.exe, which starts the
# services, passes on its own standard error and WINEDEBUG, so everything
# started from here writes its events to $err.
WINEDEBUG=-all,+eventlog "$wine" wineboot -i >/dev/null 2>>"$err"
# The prefix made, all of it ends: a service created while services.exe
# is being shut down was seen to vanish.
[ -n "$wineserver" ] && "$wineserver" -w
# Wine stops the services when no other program runs: one waits throughout.
WINEDEBUG=-all,+eventlog "$wine" "$(winpath "$ctl")" sleep 3600 \
	>/dev/null 2>>"$err" &
keeper=$!

ctlw=$(winpath "$ctl")
i=0
until w "$ctlw" query gbrsvc-none | grep -q "error=1060"; do
	i=$((i + 1))
	if [ $i -gt 60 ]; then
		echo "Bail out! Wine's service manager does not answer"
		exit 1
	fi
	sleep 0.5
done

# svc_test NAME EXE PIPE_CHECK RELOADED SLOW FLAGS: one service's life.
# PIPE_CHECK is a function that succeeds when the pipe answers as it
# should (and sets $why when not); RELOADED is the log's line for a
# reload; SLOW=1 when the start lasts long enough to be sent a stop.
svc_test() {
	name=$1 exe=$2 pipe_check=$3 reloaded=$4 slow=$5 flags=$6
	dir=$c_drive/$name
	log=$dir/state/gbrd.log
	mkdir -p "$dir"
	printf '[daemon]\nlog_level = info\n' > "$dir/gbrd.conf"

	out=$(w sc.exe create "$name" binPath= "\"$(winpath "$exe")\" --service -S C:/$name/state -c C:/$name/gbrd.conf $flags" start= demand)
	got=$(w "$ctlw" query "$name")
	why="$out
$got" check "$name: sc create" sh -c 'echo "$1" | grep -q "state=STOPPED"' - "$got"

	w sc.exe start "$name" >/dev/null
	if [ "$slow" = 1 ]; then
		# Windows says ERROR_SERVICE_CANNOT_ACCEPT_CTRL (1061), Wine
		# ERROR_INVALID_SERVICE_CONTROL (1052): no controls while pending.
		out=$(w "$ctlw" control "$name" stop)
		why=$out check "$name: a stop while it starts is refused" \
			sh -c 'echo "$1" | grep -q -E "error=(1052|1061)"' - "$out"
	fi
	states=$(w "$ctlw" wait "$name" RUNNING 90)
	if [ "$slow" = 1 ] || echo "$states" | grep -q "state=START_PENDING"; then
		why=$states check "$name: START_PENDING, then RUNNING" \
			sh -c 'echo "$1" | grep -q "state=START_PENDING" && echo "$1" | tail -n 1 | grep -q "state=RUNNING"' - "$states"
		cps=$(echo "$states" | grep START_PENDING | sed 's/.*checkpoint=\([0-9]*\).*/\1/' | sort -u | wc -l)
		if [ "$slow" = 1 ]; then
			why=$states check "$name: the checkpoint moves on while it starts ($cps seen)" [ "$cps" -ge 2 ]
		else
			# gbrd.exe's start is short: the checkpoint may not move
			# before it is RUNNING; svc-fake's long start shows it does.
			skip "$name: the checkpoint moves on while it starts" "the start was over after $cps checkpoint(s)"
		fi
		why=$states check "$name: a 30 s wait hint while it starts" \
			sh -c 'echo "$1" | grep START_PENDING | grep -q "wait_hint=30000"' - "$states"
	else
		# An empty log replays in milliseconds: the first query already
		# finds it RUNNING. The pending states are svc-fake's checks
		# above, on the same service code; RUNNING is checked below.
		why=$states check "$name: RUNNING" \
			sh -c 'echo "$1" | tail -n 1 | grep -q "state=RUNNING"' - "$states"
		skip "$name: START_PENDING and its checkpoints" "the start was over before the first query"
		skip "$name: a 30 s wait hint while it starts" "the start was over before the first query"
	fi
	why=$states check "$name: RUNNING accepts stop, shutdown and paramchange only" \
		sh -c 'echo "$1" | tail -n 1 | grep -q "accepts=stop,shutdown,paramchange "' - "$states"

	check "$name: its pipe answers once RUNNING" $pipe_check

	out=$(w "$ctlw" control "$name" pause)
	why=$out check "$name: pause is refused (ERROR_INVALID_SERVICE_CONTROL)" \
		sh -c 'echo "$1" | grep -q "error=1052"' - "$out"
	out=$(w "$ctlw" control "$name" interrogate)
	why=$out check "$name: interrogate is answered" \
		sh -c 'echo "$1" | grep -q "error=0 state=RUNNING"' - "$out"

	printf '[daemon]\nlog_level = debug\n' > "$dir/gbrd.conf"
	out=$(w "$ctlw" control "$name" paramchange)
	i=0
	while [ $i -lt 50 ] && ! grep -q "$reloaded" "$log" 2>/dev/null; do
		sleep 0.2
		i=$((i + 1))
	done
	why="$out
$(tail -n 5 "$log" 2>/dev/null)" check "$name: PARAMCHANGE re-reads the config" \
		grep -q "$reloaded" "$log"

	out=$(w "$ctlw" control "$name" stop)
	states=$(w "$ctlw" wait "$name" STOPPED 60)
	why="$out
$states" check "$name: stop: STOP_PENDING, then STOPPED with exit code 0" \
		sh -c 'echo "$1" | grep -q "state=STOP_PENDING" && echo "$2" | tail -n 1 | grep -q "state=STOPPED .*win32_exit=0 service_exit=0"' - "$out" "$states"
	why=$(tail -n 5 "$log" 2>/dev/null) check "$name: its log says why it stopped" \
		sh -c 'grep -q "shutting down: service stop" "$1" && grep -q "stopped" "$1"' - "$log"
	why=$(tail -n 5 "$err") check "$name: the event log has running and stopped" \
		sh -c 'eventually() { i=0; until grep -q "$1" "$2"; do i=$((i + 1)); [ $i -gt 150 ] && return 1; sleep 0.1; done; }; eventually "is running as the service $2" "$1" && eventually "service $2) stopped: service stop" "$1"' - "$err" "$name"

	printf '[daemon]\nbroken line, not a key\nno_such_key = 1\n' > "$dir/gbrd.conf"
	w sc.exe start "$name" >/dev/null
	states=$(w "$ctlw" wait "$name" STOPPED 60)
	why=$states check "$name: a broken config: STOPPED, ERROR_SERVICE_SPECIFIC_ERROR, code 1" \
		sh -c 'echo "$1" | tail -n 1 | grep -q "state=STOPPED .*win32_exit=1066 service_exit=1 "' - "$states"
	why=$(tail -n 3 "$log" 2>/dev/null) check "$name: its log says why it could not start" \
		grep -q "error: .*gbrd.conf" "$log"
	why=$(tail -n 3 "$err") check "$name: so does the event log" \
		eventually "service $name) could not start: .*gbrd.conf" "$err"

	out=$(w sc.exe failure "$name" reset= 86400 actions= restart/5000/restart/30000//)
	got=$(w "$ctlw" failure "$name")
	if echo "$got" | grep -q "error=124"; then
		skip "$name: recovery actions as install.ps1 sets them" \
		    "Wine's QueryServiceConfig2 cannot read failure actions (ERROR_INVALID_LEVEL)"
	else
		why="$out
$got" check "$name: recovery actions as install.ps1 sets them" \
		sh -c 'echo "$1" | grep -q "reset=86400 actions=3 restart/5000 restart/30000 none/0"' - "$got"
	fi

	w sc.exe delete "$name" >/dev/null
	out=$(w "$ctlw" query "$name")
	why=$out check "$name: sc delete removes it" \
		sh -c 'echo "$1" | grep -q "error=1060"' - "$out"
}

# The fake's pipe answers with daemon.status's "service" object.
fake_pipe() {
	why=$(w "$ctlw" pipe gbr-svctest)
	echo "$why" | grep -q '"name":"gbrsvc-fake","state":"running"'
}
svc_test gbrsvc-fake "$fake" fake_pipe "PARAMCHANGE: reloaded" 1 \
	"-r 3 -p gbr-svctest -d 1500"

out=$("$wine" "$(winpath "$fake")" --service -S C:/x -c C:/x 2>&1 | tr -d '\r')
why=$out check "--service outside the service manager says so" \
	sh -c 'echo "$1" | grep -q "is for the Service Control Manager"' - "$out"

gbrd=$build/gbrd.exe
gbrctl=$build/gbrctl.exe
if [ -f "$gbrd" ] && [ -f "$gbrctl" ]; then
	# gbrctl status against the service's pipe: exit 0 is an answer.
	gbrd_pipe() {
		"$wine" "$(winpath "$gbrctl")" --socket gbr-svctest-gbrd \
		    status >"$WINEPREFIX/gbrctl.out" 2>&1
		rc=$?
		why="exit $rc: $(tr -d '\r' < "$WINEPREFIX/gbrctl.out")"
		return $rc
	}
	svc_test gbrsvc-gbrd "$gbrd" gbrd_pipe "PARAMCHANGE: reloaded" 0 \
		"-s gbr-svctest-gbrd"
else
	skip "gbrd.exe as a service" "gbrd.exe and gbrctl.exe are not built yet"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
