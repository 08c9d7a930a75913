#!/usr/bin/env bash
# The generated sections of a Markdown file (docs/ALGORITHMS.md,
# docs/LAUNCHING.md) must be exactly what a tool prints. With TOOL the
# tool's file name (chorus-verify, chorus-run), a section is the lines between
#   <!-- BEGIN TOOL ARGS -->
#   <!-- END TOOL ARGS -->
# and holds the output of `TOOL ARGS`; where that output is plain
# text, the section wraps it in a ``` fence, whose two lines are not compared.
#
# Usage: check_generated_sections.sh [--update] TOOL_PATH DOC [REQUIRED_ARGS...]
#   every section of DOC is compared (each REQUIRED_ARGS must have one);
#   --update rewrites the sections of DOC with what the tool prints.
set -euo pipefail
set -f  # ARGS are split into words, never globbed
update=0
if [ "${1:-}" = "--update" ]; then
  update=1
  shift
fi
verify="$1"
doc="$2"
shift 2
tool=$(basename "$verify")

# The ARGS of every section, in order.
mapfile -t sections < <(sed -n "s/^<!-- BEGIN $tool \(.*\) -->$/\1/p" "$doc")
if [ ${#sections[@]} -eq 0 ]; then
  echo "$doc has no section between <!-- BEGIN $tool ARGS --> and <!-- END ... -->"
  exit 1
fi
for required in "$@"; do
  found=0
  for args in "${sections[@]}"; do [ "$args" = "$required" ] && found=1; done
  if [ $found -eq 0 ]; then
    echo "$doc has no generated section <!-- BEGIN $tool $required -->"
    exit 1
  fi
done

# committed ARGS: the section's lines, without a ``` fence around them.
committed() {
  local text
  text=$(awk -v begin="<!-- BEGIN $tool $1 -->" -v end="<!-- END $tool $1 -->" '
    $0 == end { inside = 0; closed = 1 }
    inside { print }
    $0 == begin { inside = 1 }
    END { if (!closed) exit 3 }' "$doc") || {
    echo "$doc: <!-- BEGIN $tool $1 --> has no <!-- END $tool $1 -->" >&2
    return 1
  }
  if [ "$(head -n 1 <<<"$text")" = '```' ] && [ "$(tail -n 1 <<<"$text")" = '```' ]; then
    text=$(sed '1d;$d' <<<"$text")
  fi
  printf '%s\n' "$text"
}

fenced() { [ "$(awk -v begin="<!-- BEGIN $tool $1 -->" '
  found { print; exit } $0 == begin { found = 1 }' "$doc")" = '```' ]; }

failed=0
for args in "${sections[@]}"; do
  status=0
  # shellcheck disable=SC2086  # ARGS are words
  generated=$("$verify" $args) || status=$?
  if [ $status -ne 0 ]; then
    echo "$tool $args exited with status $status"
    failed=1
    continue
  fi
  text=$(committed "$args") || {
    failed=1
    continue
  }
  if [ $update -eq 1 ]; then
    fence=""
    if fenced "$args"; then fence='```'; fi
    tmp=$(mktemp)
    # The text through the environment: awk -v would read its backslashes as escapes.
    text="$generated" awk -v begin="<!-- BEGIN $tool $args -->" \
      -v end="<!-- END $tool $args -->" -v fence="$fence" '
      $0 == begin {
        print
        if (fence != "") print fence
        print ENVIRON["text"]
        if (fence != "") print fence
        skip = 1
        next
      }
      $0 == end { skip = 0 }
      !skip { print }' "$doc" >"$tmp"
    cat "$tmp" >"$doc"
    rm -f "$tmp"
    echo "updated: $tool $args"
    continue
  fi
  if [ "$text" != "$generated" ]; then
    echo "$doc: the section of '$tool $args' differs from what it prints:"
    diff <(printf '%s\n' "$text") <(printf '%s\n' "$generated") || true
    failed=1
  else
    echo "ok: $tool $args"
  fi
done
if [ $failed -ne 0 ]; then
  [ $update -eq 1 ] || echo "Regenerate them: $0 --update $verify $doc"
  exit 1
fi
echo "$doc's generated sections match what $tool prints"
