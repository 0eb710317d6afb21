"""Where and how the numbers are computed: devices, precision, threads, the C++ kernels,
several processes (torch.distributed).

- :mod:`.devices`: ``auto``/``cpu``/``cuda``/``mps`` resolved, with a one-line error
- :mod:`.precision`: bf16 where the hardware has it natively, fp16/fp32 elsewhere
- :mod:`.parallel`: an encoder run over length groups on one thread per core
- :mod:`.kernels` (+ ``kernels.cpp``): the fused LSTM and lazy-Adam loops, built on first use
- :mod:`.distributed`: the workers of a distributed training (torchrun, ``--nproc``)"""
