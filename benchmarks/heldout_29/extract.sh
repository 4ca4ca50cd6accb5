#!/bin/sh
# Extracts the held-out repositories (bare mirrors under /work/.mirror, brought with the `fetch`
# tool) into /tmp/repos; source and config files only where a mirror lacks some large blobs.
set -e
mkdir -p /tmp/repos
for d in CarperAI+trlx OpenRLHF+OpenRLHF crowsonkb+k-diffusion willisma+SiT jaywalnut310+vits \
    huggingface+distil-whisper Megvii-BaseDetection+YOLOX IDEA-Research+DINO lyuwenyu+RT-DETR \
    openai+consistency_models PixArt-alpha+PixArt-alpha pytorch+xla microsoft+Samba jik876+hifi-gan \
    karpathy+llama2.c WongKinYiu+yolov7 weirayao+torchprime \
    lucidrains+PaLM-rlhf-pytorch; do
  n=${d#*+}; g=/work/.mirror/$d/repo; mkdir -p /tmp/repos/$n
  git --git-dir=$g archive HEAD $(git --git-dir=$g ls-tree -r --name-only HEAD \
    | grep -E '\.(py|yaml|yml|json|sh|toml|cfg)$') | tar -x -C /tmp/repos/$n
done
mkdir -p /tmp/repos/pl-fabric
git --git-dir=/work/.mirror/Lightning-AI+pytorch-lightning/repo archive HEAD examples/fabric | tar -x -C /tmp/repos/pl-fabric
