#!/bin/sh
# Re-runs distlint on every held-out entry (trees extracted under /tmp/repos by extract.sh).
here=$(dirname "$0")
{
"$here/run.sh" llama2.c train.py
"$here/run.sh" SiT train.py
"$here/run.sh" k-diffusion train.py
"$here/run.sh" consistency_models scripts/cm_train.py scripts/edm_train.py
"$here/run.sh" vits train.py train_ms.py
"$here/run.sh" hifi-gan train.py
"$here/run.sh" distil-whisper training/run_distillation.py
"$here/run.sh" YOLOX tools/train.py
"$here/run.sh" DINO main.py
"$here/run.sh" RT-DETR/rtdetr_pytorch tools/train.py
"$here/run.sh" PixArt-alpha train_scripts/train.py
"$here/run.sh" trlx examples/ppo_sentiments.py examples/sft_sentiments.py
"$here/run.sh" OpenRLHF openrlhf/cli/train_dpo.py openrlhf/cli/train_sft.py openrlhf/cli/train_rm.py
"$here/run.sh" Samba pretrain.py
"$here/run.sh" xla test/test_train_mp_mnist.py test/test_train_mp_imagenet.py examples/data_parallel/train_resnet_xla_ddp.py
"$here/run.sh" yolov7 train.py train_aux.py
"$here/run.sh" torchprime torchprime/torch_xla_models/train.py
"$here/run.sh" PaLM-rlhf-pytorch train.py
"$here/run.sh" pl-fabric/examples/fabric image_classifier/train_fabric.py kfold_cv/train_fabric.py dcgan/train_fabric.py reinforcement_learning/train_fabric.py build_your_own_trainer/run.py
} 2>&1 | grep -v "fixable with"
