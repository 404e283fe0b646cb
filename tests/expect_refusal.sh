# Sourced by the command-line test scripts: expect_refusal TEXT ARGS... runs "$cli" ARGS (within
# $refusal_timeout seconds, default 120) and sets fail=1, saying why, unless it exits with status 2
# and TEXT is in what it prints on stderr.
expect_refusal() {
  local text=$1 out status
  shift
  out=$(timeout "${refusal_timeout:-120}" "$cli" "$@" 2>&1 >/dev/null)
  status=$?
  if [ $status -ne 2 ] || [[ "$out" != *"$text"* ]]; then
    echo "clustersim $*: expected status 2 and '$text', got $status: $out"
    fail=1
  fi
}
