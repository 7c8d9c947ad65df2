"""Runs examples/train_torch.py as test_restarts.py needs it: unchanged, then one result line.

    python tests/torch/run_example.py examples/train_torch.py [the example's arguments]

The example's main() runs on its own arguments and returns the model it trained; its
load_checkpoint() is watched to see where this rank started. Then every rank prints
    TFBOOT_RESULT task=worker:1 rank=3 world_size=4 resumed_after_epoch=3 loss=0.012345 weights_sha256=<64 hex>
resumed_after_epoch: the epoch of the checkpoint this rank loaded (0: none); loss: the final
model's mean squared error over the whole synthetic_data(), computed locally; weights_sha256:
over the bytes of every tensor of the state dict. Equal weights on every rank show that the ranks
trained together, and equal resumed_after_epoch that every rank resumed from rank 0's checkpoint.
"""

import hashlib
import importlib.util
import os
import sys


def main():
    path = sys.argv[1]
    sys.argv = sys.argv[1:]  # the example parses its own arguments
    spec = importlib.util.spec_from_file_location("train_torch", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    import torch
    resumed = []
    load_checkpoint = example.load_checkpoint

    def watched_load_checkpoint(*args):
        state = load_checkpoint(*args)
        resumed.append(state["epoch"] if state is not None else 0)
        return state

    example.load_checkpoint = watched_load_checkpoint
    model = example.main()
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().numpy().tobytes())
    x, y = example.synthetic_data().tensors
    with torch.no_grad():
        loss = torch.nn.functional.mse_loss(model.cpu()(x), y).item()
    task = f"{os.environ.get('TFBOOT_TASK_TYPE', 'worker')}:{os.environ.get('TFBOOT_TASK_INDEX', '0')}"
    print(f"TFBOOT_RESULT task={task} rank={os.environ['RANK']} world_size={os.environ['WORLD_SIZE']} "
          f"resumed_after_epoch={resumed[0]} loss={loss:.6f} weights_sha256={digest.hexdigest()}", flush=True)


if __name__ == "__main__":
    main()
