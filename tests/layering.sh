#!/usr/bin/env bash
# layering.sh — every #include "..." in src/ and backends/ keeps to the include graph of
# docs/architecture.md (its ```layering block, the one place the graph is written), TAP.
#   A line `folder: a b` lets the folder's files include their own folder, a, b and whatever a and
#   b may include in turn; src/ folders go by name (base), backends/ folders and single files by
#   path (backends/cpu, backends/backend.h: a file stands for itself alone), `*: x` lets every
#   folder include x. A bare file name in the graph (config.h) is one the build generates.
#   An include is found as the compiler finds it: the including file's folder, then src/ (for
#   src/ files: their include path is src/ plus backends/), then backends/; one found nowhere, and
#   not a generated file of the graph, fails too, as does a folder of sources the graph does not
#   list, a graph naming a folder that is not there, and a cycle in the graph.
#   Last, the page's folder map names every source file (`name`, `name.h`, `cpu/name`, ...).
set -u
. "$(dirname "$0")/tap.sh"

ROOT=${DB_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
DOC=docs/architecture.md
cd "$ROOT" || { echo "Bail out! cd $ROOT"; exit 1; }

# ---- the graph ----
declare -A deps=()   # node -> its direct includes (space separated)
declare -A listed=() # nodes with a line of their own
declare -A named=()  # every name the graph uses
order=()             # nodes in the order of their lines
star=""
errs=""
inside=0
while IFS= read -r line; do
    if [ "$inside" = 0 ]; then
        [[ $line == '```layering'* ]] && inside=1
        continue
    fi
    [[ $line == '```'* ]] && { inside=2; break; }
    [[ $line =~ ^[[:space:]]*$ ]] && continue
    if [[ ! $line =~ ^[[:space:]]*([^:[:space:]]+):(.*)$ ]]; then
        errs+="not 'folder: a b ...': $line"$'\n'
        continue
    fi
    node=${BASH_REMATCH[1]}
    read -ra ds <<<"${BASH_REMATCH[2]}"
    for d in "${ds[@]+"${ds[@]}"}"; do named[$d]=1; done
    if [ "$node" = "*" ]; then
        star+=" ${ds[*]+"${ds[*]}"}"
        continue
    fi
    [ -n "${listed[$node]+x}" ] && errs+="$node has two lines"$'\n'
    listed[$node]=1
    named[$node]=1
    order+=("$node")
    deps[$node]=" ${ds[*]+"${ds[*]}"}"
done <"$DOC"
[ "$inside" = 0 ] && errs+="no \`\`\`layering block in $DOC"$'\n'
[ "$inside" = 1 ] && errs+="the \`\`\`layering block of $DOC is not closed"$'\n'

# the tree path a graph name stands for
name_path() {
    case $1 in
    backends | backends/*) echo "$1" ;;
    *) echo "src/$1" ;;
    esac
}
is_file_name() { [[ ${1##*/} == *.* ]]; }
for nm in $(printf '%s\n' "${!named[@]}" | LC_ALL=C sort); do
    p=$(name_path "$nm")
    if is_file_name "$nm"; then
        # a file: a path in the tree, or a bare name the build generates (config.h)
        [[ $nm == */* ]] && [ ! -f "$p" ] && errs+="$nm: no such file $p"$'\n'
        continue
    fi
    [ -d "$p" ] || errs+="$nm: no folder $p"$'\n'
    [ -n "${listed[$nm]+x}" ] || errs+="$nm is included by a line but has none of its own"$'\n'
done
[ "${#order[@]}" -gt 0 ] || errs+="the graph lists no folder"$'\n'
ok "$([ -z "$errs" ]; echo $?)" "the graph: ${#order[@]} folders, read from $DOC"
[ -z "$errs" ] || printf '%s' "$errs" | diag
[ -z "$errs" ] || { done_testing; exit; }

# ---- what each node may include: the closure of its lines, with a cycle check ----
declare -A reach=() # node -> " a b c " (memoised)
cycle=""
visit() { # node, the path to it
    local fo=$1 path=$2 acc=" " d r
    [ -n "${reach[$fo]+x}" ] && return
    case " $path " in *" $fo "*) cycle="$path $fo"; reach[$fo]=" "; return ;; esac
    for d in ${deps[$fo]-}; do
        visit "$d" "$path $fo"
        acc+="$d "
        for r in ${reach[$d]}; do
            case $acc in *" $r "*) ;; *) acc+="$r " ;; esac
        done
    done
    reach[$fo]=$acc
}
for fo in "${order[@]}" $star; do visit "$fo" ""; done
ok "$([ -z "$cycle" ]; echo $?)" "the graph has no cycle${cycle:+:$cycle}"
declare -A may=() # node -> everything it may include
for fo in "${order[@]}"; do
    acc=${reach[$fo]}
    for s in $star; do
        for r in "$s" ${reach[$s]}; do
            case $acc in *" $r "*) ;; *) acc+="$r " ;; esac
        done
    done
    may[$fo]=$acc
done

# ---- the includes ----
# (helpers set a variable instead of printing: no subshell per include, so the test stays fast)
node_of() { # tree path -> NODE, the folder node it lies in
    local r
    case $1 in
    src/*/*) r=${1#src/}; NODE=${r%%/*} ;;
    src/*) NODE=src ;;
    backends/*/*) r=${1#backends/}; NODE=backends/${r%%/*} ;;
    *) NODE=backends ;;
    esac
}
normalize() { # a/./b/../c -> NORM=a/c
    local IFS=/ part out=()
    for part in $1; do
        case $part in
        "" | .) ;;
        ..) [ "${#out[@]}" -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
        *) out+=("$part") ;;
        esac
    done
    NORM="${out[*]}"
}
mapfile -t sources < <(find src backends -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.cc' -o -name '*.cpp' -o -name '*.hpp' \) | LC_ALL=C sort)
declare -A files=() count=() bad=() why=()
folders=()
for f in "${sources[@]}"; do
    node_of "$f"
    fo=$NODE
    [ -n "${files[$fo]+x}" ] || { folders+=("$fo"); files[$fo]=0; count[$fo]=0; bad[$fo]=0; why[$fo]=""; }
    files[$fo]=$((files[$fo] + 1))
done
while IFS= read -r hit; do
    f=${hit%%:*}
    rest=${hit#*:}
    lineno=${rest%%:*}
    [[ $rest =~ \#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    inc=${BASH_REMATCH[1]}
    node_of "$f"
    fo=$NODE
    count[$fo]=$((count[$fo] + 1))
    dirs=("${f%/*}")
    [ "${f#src/}" != "$f" ] && dirs+=(src)
    [ "${f%/*}" != backends ] && dirs+=(backends)
    res=""
    for d in "${dirs[@]}"; do
        [ -f "$d/$inc" ] && { normalize "$d/$inc"; res=$NORM; break; }
    done
    msg=""
    if [ -z "${listed[$fo]+x}" ]; then
        msg="$fo is not in the graph"
    elif [ -z "$res" ]; then
        # not in the tree: a file the build generates, if the graph names it
        if [ -n "${named[$inc]+x}" ] && is_file_name "$inc"; then
            case ${may[$fo]} in *" $inc "*) ;; *) msg="$inc, which $fo may not include" ;; esac
        elif [ "${f#src/}" = "$f" ] && [ -f "src/$inc" ]; then
            msg="src/$inc, which $fo may not include (src/ is not on the backends' include path)"
        else
            msg="found in none of ${dirs[*]}"
        fi
    else
        node_of "$res"
        to=$NODE
        if [ "$to" != "$fo" ]; then
            case ${may[$fo]} in
            *" $to "* | *" $res "*) ;;
            *) msg="$res ($to), which $fo may not include" ;;
            esac
        fi
    fi
    if [ -n "$msg" ]; then
        bad[$fo]=$((bad[$fo] + 1))
        why[$fo]+="$f:$lineno: #include \"$inc\": $msg"$'\n'
    fi
done < <(grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "${sources[@]}")

for fo in "${folders[@]}"; do
    p=$(name_path "$fo")
    [ "$fo" = src ] && p=src
    if [ "${bad[$fo]}" = 0 ]; then
        ok 0 "$p: ${count[$fo]} includes in ${files[$fo]} files, each one the graph allows"
    else
        ok 1 "$p: ${bad[$fo]} of ${count[$fo]} includes the graph does not allow"
        printf '%s' "${why[$fo]}" | diag
        if [ -n "${listed[$fo]+x}" ]; then
            m=${may[$fo]% }
            echo "$fo may include: $fo$m" | diag
        fi
    fi
done

# ---- the folder map names every file ----
map=$(sed -n '/^## Folder map/,/^## \|^\*\*Layering/p' "$DOC")
unnamed=""
for f in "${sources[@]}"; do
    b=${f##*/}
    stem=${b%.*}
    case $map in
    *"\`$stem\`"* | *"\`$stem."* | *"/$stem\`"* | *"/$stem."*) ;;
    *) unnamed+="$f"$'\n' ;;
    esac
done
ok "$([ -z "$unnamed" ]; echo $?)" "the folder map of $DOC names every one of the ${#sources[@]} source files"
[ -z "$unnamed" ] || printf '%s' "$unnamed" | sed 's/$/: not in the folder map/' | diag
done_testing
