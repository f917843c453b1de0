import threading

from tensordict.nn import InteractionType
from tensordict.nn.probabilistic import interaction_type

from reap.collectors.interaction import rollout_interaction


def test_rollouts_in_threads_that_end_out_of_order_leave_the_interaction_type_as_found():
    # A enters, B enters, A leaves, B leaves: with tensordict's context alone, B restores the
    # RANDOM it found on entry, and the trainer's actors sample at random from then on
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with rollout_interaction(InteractionType.RANDOM):
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with rollout_interaction(InteractionType.RANDOM):
            b_in.set()
            a_out.wait(10)
            seen["b after a left"] = interaction_type()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"b after a left": InteractionType.RANDOM}
    assert interaction_type() is None
