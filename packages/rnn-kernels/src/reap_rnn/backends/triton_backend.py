"""placeholder"""
from reap_rnn.backends.base import LayeredKernel


class TritonKernel(LayeredKernel):
    name = "triton"
