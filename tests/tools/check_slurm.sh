#!/bin/bash
# scripts/slurm/cbf-array.sbatch: bash -n, shellcheck where installed, and a
# run under a stand-in srun (below) on a plan cbf-array writes: every engine
# must get its own task with the plan's pipeline for its kind and task
# number, gpu_device 0 (Slurm's CUDA_VISIBLE_DEVICES names one GPU), and
# its interfaces set to the address of CBF_DATA_IFACE (lo: 127.0.0.1).
# usage: check_slurm.sh SBATCH CBF_ARRAY DESCRIPTION
set -euo pipefail
sbatch=$1 cbf_array=$2 desc=$3
bash -n "$sbatch"
if command -v shellcheck > /dev/null; then
    shellcheck "$sbatch"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cbf_array" "$desc" --out "$tmp/plan" > /dev/null
mkdir "$tmp/bin"
# srun: each of --ntasks tasks runs the command here, one after another,
# as Slurm would on its nodes (SLURM_PROCID, SLURM_LOCALID, one GPU each).
cat > "$tmp/bin/srun" <<'SRUN'
#!/bin/bash
n=1 out=/dev/null
while [[ $1 == -* ]]; do
    case $1 in --ntasks=*) n=${1#*=} ;; --output=*) out=${1#*=} ;; esac
    shift
done
for ((t = 0; t < n; t++)); do
    SLURM_PROCID=$t SLURM_LOCALID=$((t % 2)) CUDA_VISIBLE_DEVICES=$((t % 2)) "$@" > "${out//%t/$t}" 2>&1 || exit
done
SRUN
# cbf-run: records that it ran, in its working folder.
printf '#!/bin/bash\necho "$PWD/$1" > ran\n' > "$tmp/bin/cbf-run"
chmod +x "$tmp/bin/srun" "$tmp/bin/cbf-run"
# The interface rewrite reads addresses with iproute2's ip; a machine
# without it (a bare container) checks the rest.
iface=lo ifsed='s/^\( *interface: \).*/\1127.0.0.1/'
if ! command -v ip > /dev/null; then
    iface='' ifsed=''
    echo "note: no ip command here: the interface rewrite is not checked"
fi
PATH=$tmp/bin:$PATH CBF_DATA_IFACE=$iface CBF_OUT=$tmp/out CBF_STAGE_DELAY=0 bash "$sbatch" "$tmp/plan"
n=0
while IFS=$'\t' read -r _ name _ gpu _; do
    p=$tmp/out/$name/pipeline.yaml
    [[ -f $tmp/out/$name/ran ]] || { echo "FAIL: $name did not run"; exit 1; }
    diff <(sed -e 's/^  gpu_device: .*/  gpu_device: 0/' ${ifsed:+-e "$ifsed"} \
           "$tmp/plan/$name.yaml") "$p" || { echo "FAIL: $name's pipeline is not the plan's, rewritten"; exit 1; }
    if [[ $gpu != - ]]; then grep -q '^  gpu_device: 0$' "$p" || { echo "FAIL: $name: gpu_device"; exit 1; }; fi
    if [[ -n $iface ]]; then grep -q 'interface: 127.0.0.1$' "$p" || { echo "FAIL: $name: interface"; exit 1; }; fi
    n=$((n + 1))
done < <(grep -v '^#' "$tmp/plan/processes.tsv")
echo "ok: bash -n, shellcheck, and $n engines each ran their plan's pipeline under a stand-in srun"
