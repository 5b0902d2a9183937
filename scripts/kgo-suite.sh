#!/usr/bin/env bash
# kgo-suite.sh: runs franz-go's own kgo integration tests against `strata serve`.
#
# It copies the franz-go module kgo comes from (v1.22.3, the version interop/ uses) out of
# the module cache into a temp dir, builds ./cmd/strata, starts `strata serve` on a temp
# data dir and a free port (auto-created topics, as Kafka's default), runs
# `go test -run "$TESTS" ./pkg/kgo` in the copy with KGO_SEEDS pointing at it, stops the
# server and exits with the tests' status. Only the Go module proxy (or the module cache)
# is needed: no git clone, no Kafka. Not run by CI (minutes to hours): `make kgo-suite`.
#
# Usage:  scripts/kgo-suite.sh [REGEX] [go test flags...]      (or TESTS=REGEX)
#   make kgo-suite TESTS='REGEX' [KGO_TEST_RECORDS=N]
# Environment (kgo's helpers_test.go reads the KGO_* ones):
#   TESTS             the -run regex (default: every test)
#   MEMBERS           1 (default): one strata serve; 3: a cluster of three members (each a
#                     Raft voter and a broker, free ports picked with python3)
#   KGO_TEST_RF       replication factor of the suite's topics (default 1, 3 for a cluster)
#   KGO_TEST_RECORDS  records the ETL tests produce and consume (default here 50000;
#                     kgo's own default is 500000)
#   KGO_LOG_LEVEL     debug|info|none for the clients' logs (kgo's default info)
#   KGO_TEST_UNSAFE, KGO_TEST_MAX_TOPIC_PARTS, KGO_TEST_TLS, KGO_TEST_SCRAM: passed through
#   TIMEOUT           go test -timeout (default 30m)
#   STRATA_FLAGS      extra flags for strata serve (e.g. "--override group.initial.rebalance.delay.ms=0")
#   KEEP=1            keep the temp dir (data dir, server log, franz-go copy)
#   MOVE_COORDINATORS=SECONDS  (MEMBERS=3) while the tests run, every SECONDS move the
#                     leadership of every partition of __consumer_offsets and
#                     __transaction_state, and so its group or transaction coordinator, to
#                     the next member (strata reassign rotates each replica list, strata
#                     leader-election --election-type preferred): the coordinators' moves
#                     the kgo tests must survive (log movers.log)
#
# The tests issues 27 and 29 name, one command each (from the repo root):
#   KIP-848 groups (issue 29):
#     scripts/kgo-suite.sh '^TestGroupETL$/^(range|sticky)$/^848$'   (range/848, sticky/848, sticky/848/static)
#     scripts/kgo-suite.sh '^TestGroupSimple$/848'
#     scripts/kgo-suite.sh '^Test848RegexBrokerResolves$'
#     scripts/kgo-suite.sh '^TestConsumeRegex$'
#   share groups (issue 29):
#     scripts/kgo-suite.sh '^(TestShareGroup|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin|TestConsumeRegexShareSkipsInternal)$'
#   transactions (issue 27):
#     scripts/kgo-suite.sh '^TestTxnEtl$'
#     scripts/kgo-suite.sh '^TestTxnEtl$/^(range|sticky)$/^848$'
#     scripts/kgo-suite.sh '^TestGroupETL$'
#   everything:
#     scripts/kgo-suite.sh
#   against a three-member cluster, any of them (issue 27):
#     MEMBERS=3 scripts/kgo-suite.sh '^TestGroupETL$'
#     MEMBERS=3 KGO_TEST_RECORDS=500000 MOVE_COORDINATORS=10 scripts/kgo-suite.sh '^TestGroupETL$'
# Add -v (e.g. scripts/kgo-suite.sh '^TestGroupSimple$' -v) to see each subtest.
set -euo pipefail

FRANZ_VERSION=v1.22.3
root=$(cd "$(dirname "$0")/.." && pwd)

TESTS=${1:-${TESTS:-.}}
[ $# -gt 0 ] && shift
TIMEOUT=${TIMEOUT:-30m}

modcache=$(go env GOMODCACHE)
src="$modcache/github.com/twmb/franz-go@$FRANZ_VERSION"
if [ ! -d "$src/pkg/kgo" ]; then
	echo "kgo-suite: fetching github.com/twmb/franz-go@$FRANZ_VERSION into the module cache" >&2
	(cd "$root/interop" && go mod download "github.com/twmb/franz-go@$FRANZ_VERSION")
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-kgo-suite.XXXXXX")
pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [ "${KEEP:-0}" = 1 ]; then
		echo "kgo-suite: kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The module copy: files in the module cache are read-only, and go test writes go.sum.
cp -R "$src" "$tmp/franz-go"
chmod -R u+w "$tmp/franz-go"
# kgo learns what the broker supports (allow848, allowShare, static membership) in adm(),
# the first time a test asks for its admin client; a test that checks allow848 first
# (TestGroupSimple/848 run alone) is skipped against any broker. Ask once before the tests,
# as a run of the whole suite ends up doing. The only file added to the copy.
cat >"$tmp/franz-go/pkg/kgo/strata_suite_main_test.go" <<'EOF'
package kgo

import (
	"os"
	"testing"
)

// TestMain probes the broker's API versions before any test reads what it found.
func TestMain(m *testing.M) {
	adm()
	os.Exit(m.Run())
}
EOF

echo "kgo-suite: building strata" >&2
(cd "$root" && go build -o "$tmp/strata" ./cmd/strata)

echo "kgo-suite: building kgo's tests" >&2 # warms the build cache for go test below
(cd "$tmp/franz-go" && GOFLAGS=-mod=mod go test -c -o "$tmp/kgo.test" ./pkg/kgo)

# freeports N prints N ports free now (bound to port 0 and released).
freeports() {
	python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# start_member I ARGS... starts strata serve number I (logs serve-I.out/.log).
pids=()
start_member() {
	local i=$1
	shift
	# shellcheck disable=SC2086 # STRATA_FLAGS is a list of flags
	"$tmp/strata" serve --data-dir "$tmp/data-$i" --auto-create-topics "$@" \
		${STRATA_FLAGS:-} >"$tmp/serve-$i.out" 2>"$tmp/serve-$i.log" &
	pids+=($!)
}

# await_member I prints the address member I listens on, once it says so.
await_member() {
	local i=$1 a=
	for _ in $(seq 1 600); do
		a=$(sed -n 's/^listening on //p' "$tmp/serve-$i.out" | head -n1)
		if [ -n "$a" ]; then
			echo "$a"
			return 0
		fi
		if ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
			echo "kgo-suite: strata serve $i exited before listening:" >&2
			cat "$tmp/serve-$i.log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "kgo-suite: strata serve $i printed no address in 60s" >&2
	return 1
}

MEMBERS=${MEMBERS:-1}
addrs=()
if [ "$MEMBERS" = 1 ]; then
	start_member 1 --listen 127.0.0.1:0
	addrs+=("$(await_member 1)")
	rf=1
else
	# A cluster: each member a Raft voter and a broker (strata serve --raft-addr --peer).
	read -r -a ports <<<"$(freeports $((2 * MEMBERS)))"
	peers=()
	for i in $(seq 1 "$MEMBERS"); do
		peers+=(--peer "$i=127.0.0.1:${ports[$((2 * i - 2))]},127.0.0.1:${ports[$((2 * i - 1))]}")
	done
	for i in $(seq 1 "$MEMBERS"); do
		start_member "$i" --node-id "$i" --listen "127.0.0.1:${ports[$((2 * i - 2))]}" \
			--raft-addr "127.0.0.1:${ports[$((2 * i - 1))]}" "${peers[@]}"
	done
	for i in $(seq 1 "$MEMBERS"); do
		addrs+=("$(await_member "$i")")
	done
	rf=$((MEMBERS < 3 ? MEMBERS : 3))
fi
seeds=$(
	IFS=,
	echo "${addrs[*]}"
)
echo "kgo-suite: strata serve ($MEMBERS) on $seeds (logs $tmp/serve-*.log); go test -run '$TESTS'" >&2

# move_coordinators SECONDS rotates the replica lists of __consumer_offsets and
# __transaction_state (those that exist) and elects the preferred leaders, every SECONDS,
# until killed (see MOVE_COORDINATORS). Each command is bounded (timeout 30): one that
# hangs on a loaded machine would end the moves.
move_coordinators() {
	local every=$1 round=0 n p i t json elect moved
	local bs=$seeds # any member answers
	while sleep "$every"; do
		round=$((round + 1))
		json='{"version":1,"partitions":['
		elect='{"partitions":['
		moved=
		for t in __consumer_offsets __transaction_state; do
			n=$(timeout 30 "$tmp/strata" topics describe --bootstrap-server "$bs" --topic "$t" 2>/dev/null |
				grep -c 'Partition: ' || true)
			[ "${n:-0}" -eq 0 ] && continue
			moved+=" $t($n)"
			for p in $(seq 0 $((n - 1))); do
				i=$(((p + round) % MEMBERS))
				reps=()
				for k in 0 1 2; do reps+=($((((i + k) % MEMBERS) + 1))); done
				[ "${json: -1}" != "[" ] && json+=, && elect+=,
				json+="{\"topic\":\"$t\",\"partition\":$p,\"replicas\":[$(
					IFS=,
					echo "${reps[*]}"
				)]}"
				elect+="{\"topic\":\"$t\",\"partition\":$p}"
			done
		done
		if [ -z "$moved" ]; then
			echo "$(date -u +%T) round $round: no coordinator topic yet"
			continue
		fi
		echo "$json]}" >"$tmp/move.json"
		echo "$elect]}" >"$tmp/elect.json"
		echo "$(date -u +%T) round $round: rotating$moved"
		timeout 30 "$tmp/strata" reassign --bootstrap-server "$bs" --execute --additional \
			--reassignment-json-file "$tmp/move.json" >/dev/null 2>&1 || echo "reassign failed"
		for _ in $(seq 1 50); do
			timeout 30 "$tmp/strata" reassign --bootstrap-server "$bs" --verify \
				--reassignment-json-file "$tmp/move.json" >/dev/null 2>&1 && break
			sleep 0.1
		done
		timeout 30 "$tmp/strata" leader-election --bootstrap-server "$bs" --election-type preferred \
			--path-to-json-file "$tmp/elect.json" 2>&1 | tail -n 2 | cut -c1-120
	done
}
mover=
if [ -n "${MOVE_COORDINATORS:-}" ] && [ "$MEMBERS" -ge 3 ]; then
	move_coordinators "$MOVE_COORDINATORS" >"$tmp/movers.log" 2>&1 &
	mover=$!
fi

status=0
(
	cd "$tmp/franz-go/pkg/kgo" &&
		KGO_SEEDS="$seeds" \
			KGO_TEST_RF="${KGO_TEST_RF:-$rf}" \
			KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-50000}" \
			GOFLAGS=-mod=mod \
			go test -count=1 -run "$TESTS" -timeout "$TIMEOUT" "$@" .
) || status=$?
if [ -n "$mover" ]; then
	kill "$mover" 2>/dev/null || true
	wait "$mover" 2>/dev/null || true
	echo "kgo-suite: coordinators moved: $(grep -c rotating "$tmp/movers.log" || true) rounds ($tmp/movers.log)" >&2
fi

for pid in "${pids[@]}"; do
	kill -TERM "$pid" 2>/dev/null || true
done
for i in $(seq 1 "${#pids[@]}"); do
	serve_status=0
	wait "${pids[$((i - 1))]}" || serve_status=$?
	if [ "$serve_status" -ne 0 ]; then
		echo "kgo-suite: strata serve $i exited $serve_status; its log:" >&2
		tail -n 50 "$tmp/serve-$i.log" >&2
		[ "$status" -eq 0 ] && status=1
	fi
done
pids=()
if [ "$status" -ne 0 ]; then
	echo "kgo-suite: FAIL (exit $status); last lines of the server logs:" >&2
	tail -n 20 "$tmp"/serve-*.log >&2
else
	echo "kgo-suite: ok" >&2
fi
exit "$status"
