"""offsim's PyTorch side: recording what a training step saves, and measuring it on a GPU.

Nothing here needs liboffsim.so (the `offsim` package beside it does); everything needs torch.
Each tool runs as a module, from python/ or with this folder on PYTHONPATH or the package
installed (`pip install --no-build-isolation --no-index ./python`):

  recorder       what autograd saves in one training step of any nn.Module, as the CSV that
                 `[trace] file` reads, with op counts and every allocation's lifetime
                 (alloc_log.c, preloaded); hf_models.py and moe_models.py are HuggingFace's
                 families written op by op (`ops = hf`), standins.py what CUDA kernels save,
                 flops.py the dispatch-level op counter, lifetimes.py the allocation log's
                 reader, examples/ a model of one's own
  ground_truth   offsim's own policies (resident, sync and async offload, checkpoint)
                 measured on decoder.py, the [transformer] generator's model (`ops = fused`)
  frameworks     six frameworks' offload handlers written again after their code, on
                 hf_models.py's model: what the `framework =` presets claim
  compare_table  ground_truth's measurements beside offsim's predictions

tensors.py holds what they share: storage and byte counts, a timed step, the device check.
"""
