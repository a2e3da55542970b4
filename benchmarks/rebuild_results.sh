#!/usr/bin/env bash
# Rebuild the results pages after a new evaluator version: every recorded candidate behind
# them judged again on one GPU model (the pages were first made on the H200; a rebuild on
# another model replays the H200's profiles with that model's verdicts, and says so), then
# every page remade from the new verdicts on a CPU.
#
# On the GPU machine, in the repository root, one device command each (each ends inside
# 10 minutes; rows and exports land in $OUT as they fall):
#
#   KB=path/to/kernelbench/problems.jsonl OUT=dir bash benchmarks/rebuild_results.sh rules
#   OUT=dir bash benchmarks/rebuild_results.sh llm
#
# Or both in one device command, one after the other within TOTAL_S seconds (default 540;
# each step's LIMIT_S is what is left less 75 s, the most its timeout adds; a step with less
# than 60 s of it is not started):
#
#   KB=... OUT=dir STEPS="rules llm" TOTAL_S=540 bash benchmarks/rebuild_results.sh slot
#
# rules: benchmarks/rule_sweep.py over the 64 problems of docs/results/rewriter.md, every
#   transformation the rule rewriter can reach (compile_max_autotune too).
# llm: benchmarks/llm_sweep.py --rejudge-older over the 240 recorded LLM replies.
# Each uses every GPU it sees (at most 4: the device returns 8 files), one process per GPU:
# the rule sweep shares problems through claim files, the LLM sweep takes a shard each.
# Resumable over device slots and sessions: copy what $OUT held into PREV (default
# docs/results/data/rebuild/CARD, the machine's GPU model in lower case and dashes, such as
# nvidia-h200: committed, so that a later session's checkout carries it to the machine, and
# one folder per model, so that a slot on whichever GPU is lent carries that model's rebuild
# on) before the next command; rows whose verdicts this evaluator version made and PREV's
# exports hold count as done, and every export of PREV is loaded first. Every slot of a PREV
# must run on the GPU model its earlier slots ran on (card.txt; a different one is refused,
# MIXED_CARDS=1 allows it), so that one page's verdicts come from one kind of GPU. LIMIT_S
# (default 540) is each sweep's deadline; SELECT (rules) replaces the problems' selection,
# EXTRA adds arguments to each sweep (a CPU try: SELECT= EXTRA='--device cpu'; EXTRA=--dry-run
# for llm).
#
# After each device command, on this machine, keep what came back (the slot's rows and exports
# replace PREV's, its log is appended; PREV by the slot's card.txt unless given):
#
#   bash benchmarks/rebuild_results.sh keep FOLDER
#
# Then, on any machine, once every verdict behind the pages (the committed exports) has one
# of this evaluator version in PREV's exports (this mode counts those left and stops
# otherwise, unless FORCE=1):
#
#   KB=path/to/kernelbench/problems.jsonl bash benchmarks/rebuild_results.sh pages
#
# pages: merges the exports into the committed data files (the new verdict of a candidate
#   wins), remakes the transfer table of reproduction.md (another card than the H200's), then
#   the pages of each part in PARTS (default "rules llm"; a part is remade once its own
#   verdicts are all this evaluator's, so the rule pages need not wait for the LLM ones):
#   rules: rewriter.md, learning.md and the rule bench's reproduction.html;
#   llm: llm_rewriter.md (both tables), reproduction.md's fixed-configuration study and
#   llm_reproduction.html.
#   Each page (HTML too, through report --note) is stamped under its title with the evaluator
#   version and card that judged it again (reproduction.md with the llm part; the stamp mode
#   alone, markdown pages: bash benchmarks/rebuild_results.sh stamp PAGE...). The
#   LLM-proposer study of reproduction.md is not remade: its recorded proposer replies
#   answered prompts that quote the old scores. PREV names the rebuild the pages take (needed
#   when several GPU models have one); every page script replays the verdicts of its card
#   (--evaluated-device cuda:CARD). DRY_RUN=1 prints the steps instead.
set -u
mode=${1:?rules, llm, slot, keep, pages or stamp}
REBUILDS=docs/results/data/rebuild
LIMIT_S=${LIMIT_S:-540}
DATA=docs/results/data
IDS="1 23 40 63 33 41 53 73 4 8 12 16 20 27 30 36 44 48 57 60 66 69 77 80 84 87 90 94 97 13 18 25"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

gpus() {  # GPUs to use: those the machine lists, at most 4
  local count
  count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  echo $(( count > 4 ? 4 : (count < 1 ? 1 : count) ))
}

card() {  # the GPU model this machine judges on ("cpu" without one)
  local name
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  echo "${name:-cpu}"
}

slug() {  # a GPU model as a folder name: "NVIDIA H200" -> nvidia-h200
  tr '[:upper:]' '[:lower:]' <<< "$1" | sed -E 's/[^a-z0-9]+/-/g; s/^-//; s/-$//'
}

same_card() {  # this machine's GPU is the one PREV's slots ran on (or PREV has none yet)
  local here there
  here=$(card)
  there=$(cat "$PREV/card.txt" 2>/dev/null)
  if [ -n "$there" ] && [ "$there" != "$here" ] && [ "${MIXED_CARDS:-0}" != 1 ]; then
    echo "rebuild_results: $PREV was judged on $there, this machine has $here: go on on" \
      "$there, or start again with an empty PREV (MIXED_CARDS=1 mixes them)" >&2
    return 1
  fi
  echo "$here" > "$OUT/card.txt"
}

sweep() {  # mode, rows seeds...: one sweep process per GPU, logs prefixed, all awaited
  local name=$1 n g
  shift
  OUT=${OUT:?the output folder}
  same_card || exit 2
  n=$(gpus)
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    nproc; echo "gpus used: $n"; echo "resumed from: $PREV"; } > "$OUT/env.txt" 2>&1
  : > "$OUT/${name}_rows.jsonl"
  for seed in "$@"; do  # the rows so far: PREV's are cumulative, so the last one given wins
    [ -s "$seed" ] && zcat -f "$seed" > "$OUT/${name}_rows.jsonl"
  done
  mapfile -t resume < <(ls "$PREV"/"$name"-*.jsonl.gz 2>/dev/null)
  scratch=$(mktemp -d)  # this command's stores and claim files: its export is what lasts
  for g in $(seq 0 $((n - 1))); do
    "${name}_command" "$g" "$n" "${resume[@]}"
    # shellcheck disable=SC2086  # EXTRA: more arguments for the sweep, split on spaces
    CUDA_VISIBLE_DEVICES=$g TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-$g TRITON_CACHE_DIR=/tmp/triton-$g \
      TORCH_EXTENSIONS_DIR=/tmp/extensions-$g AUTOPROFILER_HOME=/tmp/home-$g \
      timeout -k 30 $((LIMIT_S + 45)) "${command[@]}" ${EXTRA:-} 2>&1 \
      | sed -u "s/^/[gpu$g] /" >> "$OUT/$name.log" &
  done
  wait
  rm -rf "$scratch"
  echo "done: $(wc -l < "$OUT/${name}_rows.jsonl") rows" >> "$OUT/$name.log"
}

rules_command() {  # gpu, gpus, exports to resume from...: sets command
  local g=$1
  shift 2
  # shellcheck disable=SC2086  # SELECT: the problems' selection, split on spaces
  command=(python3 benchmarks/rule_sweep.py "${KB:?KernelBench problems.jsonl}"
    ${SELECT---levels 1 2 --ids $IDS} --store "$scratch/rules-$g.sqlite"
    --rows "$OUT/rules_rows.jsonl" --device-name "$(card | sed 's/^NVIDIA //')"
    --claims "$scratch/claims" --exclude
    --deadline-s "$LIMIT_S" --export "$OUT/rules-$g.jsonl.gz" --resume-from "$@")
}

llm_command() {  # gpu, gpus, exports to resume from...: sets command
  local g=$1 n=$2
  shift 2
  command=(python3 benchmarks/llm_sweep.py --requests $DATA/llm_requests.jsonl.gz
    --replies $DATA/llm_replies.jsonl.gz --recordings $DATA/kernelbench_h200.jsonl.gz
    --recordings $DATA/kernelbench_h200.jsonl.gz $DATA/kernelbench_h200_more.jsonl.gz
    --store "$scratch/llm-$g.sqlite" --rows "$OUT/llm_rows.jsonl" --export "$OUT/llm-$g.jsonl.gz"
    --rejudge-older --shard "$g/$n" --deadline-s "$LIMIT_S"
    --resume-from $DATA/llm_evaluations.jsonl.gz "$@")
}

left_to_judge() {  # the pages' export, then PREV's exports: its verdicts with no newer one
  python3 - "$@" <<'EOF'
import gzip, json, os, sys
from autoprofiler.evaluate.config import EVALUATOR_VERSION
def verdicts(path):  # (problem hash, candidate hash, evaluator version) of each evaluation
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for row in map(json.loads, lines):
            if "evaluation" in row:
                version = row["result"].get("evaluator_version")
                yield row["problem_hash"], row["candidate_hash"], version
slots = [path for path in sys.argv[2:] if os.path.exists(path)]  # a glob that matched none
done = {(p, c) for path in slots for p, c, v in verdicts(path) if v == EVALUATOR_VERSION}
behind = {(p, c) for p, c, _ in verdicts(sys.argv[1])}  # a merged rebuild's verdicts are beside
print(len(behind - done) if slots else "all")  # the first ones: each candidate counts once
EOF
}

pages() {  # the parts' page scripts see its locals (judged, recordings, evaluations, html_note)
  local rules llm part card exports judged recordings evaluations html_note
  # shellcheck disable=SC2206  # PARTS: the parts, split on spaces
  local parts=(${PARTS-rules llm})
  rules_or_llm part PARTS "${parts[@]}" || return
  rules=$(left_to_judge $DATA/kernelbench_h200_evaluations.jsonl.gz "$PREV"/rules-*.jsonl.gz)
  llm=$(left_to_judge $DATA/llm_evaluations.jsonl.gz "$PREV"/llm-*.jsonl.gz)
  echo "verdicts left to judge again: rules $rules, llm $llm"
  for part in "${parts[@]}"; do
    if [ "${!part}" != 0 ] && [ "${FORCE:-0}" != 1 ]; then
      echo "not every $part verdict is this evaluator's yet: run the device modes again" \
        "(or FORCE=1)"
      return 1
    fi
  done
  card=$(cat "$PREV/card.txt" 2>/dev/null)
  if [ -z "$card" ]; then
    echo "rebuild_results: $PREV holds no card.txt: no slot says which GPU judged it" >&2
    return 2
  fi
  # The profiles stay the H200's recordings; the verdicts replayed are those of PREV's card
  # (the H200's first verdicts stay in the data files beside them, under their own label).
  judged=(--evaluated-device "cuda:$card")
  recordings=(--recordings $DATA/kernelbench_h200.jsonl.gz)
  evaluations=(--evaluations $DATA/kernelbench_h200_evaluations.jsonl.gz)
  set -e
  html_note=$(stamp_line | tr -d '`')
  for part in "${parts[@]}"; do
    "merge_$part"
  done
  if [ "$card" != "NVIDIA H200" ]; then  # the first verdicts were the H200's: what carried over
    mapfile -t exports < <(ls "$PREV"/rules-*.jsonl.gz "$PREV"/llm-*.jsonl.gz 2>/dev/null)
    run python3 benchmarks/transfer_table.py $DATA/kernelbench_h200_evaluations.jsonl.gz \
      $DATA/llm_evaluations.jsonl.gz "${exports[@]}" --from "cuda:NVIDIA H200" \
      --to "cuda:$card" --markdown docs/results/reproduction.md
  fi
  for part in "${parts[@]}"; do
    "${part}_pages"
  done
}

merge_rules() {  # PREV's rule exports into the rule pages' data file
  merge $DATA/kernelbench_h200_evaluations.jsonl.gz "$PREV"/rules-*.jsonl.gz
}

merge_llm() {  # PREV's LLM exports and rows into the LLM pages' data files
  merge $DATA/llm_evaluations.jsonl.gz "$PREV"/llm-*.jsonl.gz
  run gzip_into $DATA/llm_sweep_rows.jsonl.gz "$PREV/llm_rows.jsonl"
}

merge() {  # data file, exports...: the exports merged into the data file (newest wins)
  local data=$1 merged='$SCRATCH.jsonl.gz'  # a dry run makes no file
  shift
  [ "${DRY_RUN:-0}" = 1 ] || merged=$(mktemp --suffix=.jsonl.gz)
  run python3 benchmarks/merge_evaluations.py "$data" "$@" --out "$merged"
  run mv "$merged" "$data"
}

rules_pages() {  # rewriter.md, learning.md, the rule bench's reproduction.html
  local table=(python benchmarks/rewriter_table.py "${recordings[@]}" "${evaluations[@]}"
    --markdown docs/results/rewriter.md --compare compile_max_autotune "${judged[@]}")
  run "${table[@]}" --command "${table[*]}"
  run python3 benchmarks/learning_table.py "${recordings[@]}" "${evaluations[@]}" \
    --starts none SpeedOfLight basic --budget 30 --train 0.67 --rewriter rules \
    --markdown docs/results/learning.md "${judged[@]}"
  run rm -rf runs/h200-bench.sqlite
  run python3 -m autoprofiler bench --store runs/h200-bench.sqlite --name h200-rules --replay \
    "${recordings[@]}" "${evaluations[@]}" --train 0.67 --budgets 5,17,inf --rewriter rules \
    --cost-weights 0,0.01,0.05 --proposer search --iterations 30 --patience 10 --device cuda \
    "${judged[@]}" -o $DATA/reproduction_h200.json
  run python3 -m autoprofiler report runs/h200-bench.sqlite -o docs/results/reproduction.html \
    --figures docs/results/reproduction --note "$html_note"
  run stamp docs/results/rewriter.md docs/results/learning.md
}

llm_pages() {  # llm_rewriter.md, reproduction.md's fixed-configuration study and its HTML
  run python3 benchmarks/llm_table.py --rows $DATA/llm_sweep_rows.jsonl.gz \
    --requests $DATA/llm_requests.jsonl.gz --replies $DATA/llm_replies.jsonl.gz \
    --markdown docs/results/llm_rewriter.md
  run python3 benchmarks/keep_best.py "${KB:?KernelBench problems.jsonl}" \
    --markdown docs/results/llm_rewriter.md "${judged[@]}"
  run rm -rf runs/llm-learning
  run python3 benchmarks/llm_learning.py --work runs/llm-learning \
    --markdown docs/results/reproduction.md --rows $DATA/llm_learning.json "${judged[@]}"
  run python3 -m autoprofiler report runs/llm-learning/store.sqlite \
    -o docs/results/llm_reproduction.html --note "$html_note"
  run stamp docs/results/llm_rewriter.md docs/results/reproduction.md
}

gzip_into() {  # file, source: the source compressed into the file
  gzip -c "$2" > "$1"
}

run() {  # a step of pages: run it, or with DRY_RUN=1 print it (one line, quoted) instead
  if [ "${DRY_RUN:-0}" = 1 ]; then
    printf '%q ' "$@" | sed 's/ $//'
    echo
  else
    "$@"
  fi
}

only_rebuild() {  # the one folder under $REBUILDS, else a line naming them (PREV must choose)
  local folders=("$REBUILDS"/*/)
  if [ "${#folders[@]}" -ne 1 ] || [ ! -d "${folders[0]}" ]; then
    local names
    names=$(ls "$REBUILDS" 2>/dev/null | paste -sd, | sed 's/,/, /g')
    echo "rebuild_results: name the rebuild the pages take with PREV= (in $REBUILDS:" \
      "${names:-none})" >&2
    return 2
  fi
  echo "${folders[0]%/}"
}

stamp_line() {  # what a rebuilt page says under its title (markdown)
  local version line
  version=$(python3 -c "from autoprofiler.evaluate.config import EVALUATOR_VERSION as v; print(v)")
  [ -n "$version" ] || { echo "rebuild_results: no evaluator version to stamp" >&2; return 2; }
  line="Rebuilt $(date -u +%F): every verdict behind this page was judged again by evaluator"
  line="$line v$version on the $(cat "$PREV/card.txt" 2>/dev/null || echo "unnamed machine")"
  line="$line (\`benchmarks/rebuild_results.sh\`, slots in \`$PREV\`). Where the text below"
  echo "$line tells how the verdicts were made, it tells how the first ones were."
}

stamp() {  # pages...: say under each title that its verdicts were judged again, by what
  local page line
  line="> $(stamp_line)" || return 2
  for page in "$@"; do
    grep -q "^> Rebuilt " "$page" && sed -i '/^> Rebuilt /,+1d' "$page"  # the last rebuild's
    sed -i "1a\\
\\
$line" "$page"
  done
}

rules_or_llm() {  # what each is, the variable they came from, the values: each rules or llm
  local what=$1 variable=$2 value
  shift 2
  for value in "$@"; do
    case "$value" in
      rules | llm) ;;
      *) echo "rebuild_results: unknown $what $value in $variable: rules or llm" >&2; return 2 ;;
    esac
  done
}

slot() {  # the STEPS (rules, llm), one after another within TOTAL_S seconds
  local began left step
  began=$(date +%s)
  # shellcheck disable=SC2206  # STEPS: the steps, split on spaces
  local steps=(${STEPS-rules llm})
  rules_or_llm step STEPS "${steps[@]}" || return
  for step in "${steps[@]}"; do
    left=$(( ${TOTAL_S:-540} - ($(date +%s) - began) ))
    if [ $((left - 75)) -lt 60 ]; then
      echo "slot: $left s left, $step not started"
      break
    fi
    echo "slot: $step with LIMIT_S=$((left - 75)) ($(date -u +%T))"
    LIMIT_S=$((left - 75)) bash "$0" "$step" || return
  done
}

keep() {  # slot folder: what a device command left in $OUT, into its GPU model's PREV
  local slot=$1 judged_on there kind kept=""
  judged_on=$(cat "$slot/card.txt" 2>/dev/null)
  if [ -z "$judged_on" ]; then
    echo "rebuild_results: $slot holds no card.txt: not a slot of this script" >&2
    return 2
  fi
  PREV=${PREV:-$REBUILDS/$(slug "$judged_on")}
  there=$(cat "$PREV/card.txt" 2>/dev/null)
  if [ -n "$there" ] && [ "$there" != "$judged_on" ] && [ "${MIXED_CARDS:-0}" != 1 ]; then
    echo "rebuild_results: $PREV was judged on $there, the slot in $slot on $judged_on" >&2
    return 2
  fi
  mkdir -p "$PREV"
  for kind in rules llm; do
    [ -f "$slot/${kind}_rows.jsonl" ] || continue
    # rows and exports are cumulative (each slot starts from PREV's): the slot's replace them
    install -m 644 "$slot/${kind}_rows.jsonl" "$slot/${kind}"-*.jsonl.gz "$PREV/"
    { echo "== slot kept $(date -u +%FT%TZ) from $slot"; cat "$slot/$kind.log" "$slot/env.txt"
    } >> "$PREV/$kind.log" 2>/dev/null
    kept="$kept $kind ($(wc -l < "$slot/${kind}_rows.jsonl") rows)"
  done
  if [ -z "$kept" ]; then
    echo "rebuild_results: $slot holds no rows of a rules or llm slot" >&2
    return 2
  fi
  echo "$judged_on" > "$PREV/card.txt"
  echo "kept in $PREV:$kept"
}

case "$mode" in  # PREV: this machine's GPU model's rebuild, or the one the pages take
  rules | llm) PREV=${PREV:-$REBUILDS/$(slug "$(card)")} ;;
  pages | stamp) PREV=${PREV:-$(only_rebuild)} || exit 2 ;;
esac
case "$mode" in
  rules) sweep rules "$PREV/rules_rows.jsonl" ;;
  llm) sweep llm $DATA/llm_sweep_rows.jsonl.gz "$PREV/llm_rows.jsonl" ;;
  pages) pages ;;
  slot) slot ;;
  keep) keep "${2:?the folder that came back from a device command}" ;;
  stamp) shift; stamp "$@" ;;
  *) echo "unknown mode $mode: rules, llm, slot, keep, pages or stamp" >&2; exit 2 ;;
esac
