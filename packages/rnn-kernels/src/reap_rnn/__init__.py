"""reap-rnn-kernels: LSTM/GRU TensorDict modules with ``pad``, ``scan`` and ``triton`` backends.

Examples:
    >>> from reap_rnn import LSTMModule
    >>> LSTMModule(input_size=4, hidden_size=16, in_key="observation", out_key="embed").in_keys
    ['observation', 'recurrent_state_h', 'recurrent_state_c', 'is_init']
"""

from reap_rnn.layers import GRU, LSTM, GRUCell, LSTMCell
from reap_rnn.mode import recurrent_mode, set_recurrent_mode
from reap_rnn.modules import GRUModule, LSTMModule, canonicalize_rnn_subset
from reap_rnn.precision import get_recurrent_matmul_precision, set_recurrent_matmul_precision

__all__ = [
    "GRU",
    "GRUCell",
    "GRUModule",
    "LSTM",
    "LSTMCell",
    "LSTMModule",
    "canonicalize_rnn_subset",
    "get_recurrent_matmul_precision",
    "recurrent_mode",
    "set_recurrent_matmul_precision",
    "set_recurrent_mode",
]
