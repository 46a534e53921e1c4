#!/usr/bin/env bash
# Open JupyterLab at the repository root (notebooks/, results/ and data/ all in reach), with the
# project's venv as the kernel the notebooks name: "python3".
#
#   runners/lab.sh                          # local browser
#   runners/lab.sh --no-browser --ip 127.0.0.1 --port 8888
#                                           # headless/remote: open the printed URL (token included),
#                                           # e.g. through `ssh -L 8888:127.0.0.1:8888 host`
#
# Any argument is passed on to `jupyter lab`. Useful ones:
#   --no-browser      do not try to open a browser (servers, containers)
#   --ip 127.0.0.1    listen on loopback only (the default; never bind 0.0.0.0 on a shared host)
#   --port N          port (default 8888, the next free one if taken)
#   --allow-root      needed when running as root (added automatically below)
#
# Kernel: every notebook names "python3", the kernel papermill, nbval and `make test` use. It is
# registered inside the venv (`ipykernel install --sys-prefix`: .venv/share/jupyter/kernels/python3,
# pointing at .venv/bin/python), not per user, so two checkouts never share or overwrite a kernel and
# nothing is left in ~/.local. A per-user "python3" kernelspec would still win over it (Jupyter looks
# in the user's directory first): this script says so when it finds one.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "lab.sh: $VENV/bin/python not found; run 'make venv' first" >&2
  exit 1
fi
if [[ ! -x "$VENV/bin/jupyter-lab" ]]; then
  echo "lab.sh: JupyterLab is not installed in $VENV; run: $VENV/bin/pip install -e '.[lab]'" >&2
  exit 1
fi
"$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (storagebench venv)" >/dev/null
spec=$("$VENV/bin/jupyter" kernelspec list --json | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["kernelspecs"]["python3"]["resource_dir"])')
case $spec in
  "$(pwd)/$VENV"/*|"$(cd "$VENV" && pwd)"/*) echo "lab.sh: kernel 'python3' -> $(pwd)/$VENV/bin/python" >&2 ;;
  *) echo "lab.sh: warning: kernel 'python3' resolves to $spec, not to this venv; remove that kernelspec" \
          "(jupyter kernelspec remove python3) to use $VENV/bin/python" >&2 ;;
esac
extra=()
[[ $(id -u) -eq 0 ]] && extra+=(--allow-root)
exec "$VENV/bin/jupyter" lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks --ip 127.0.0.1 \
  "${extra[@]}" "$@"
