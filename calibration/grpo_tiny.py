"""Train one TRL GRPO (or RLOO) run of the calibration corpus on a tiny model built here (no Hub access).

    python calibration/grpo_tiny.py --out DIR --max-steps 120 --learning-rate 1e-3 --num-iterations 1

The model is a small `LlamaConfig` (2 layers, hidden size 32 unless told) with random weights over
a word-level `tokenizers` vocabulary of 24 tokens. The task: after a prompt of three words, write
words and stop (at most 64 tokens); the reward is the share of "good" words (8 of the 20 content
words), plus 0.25 per distinct good word (up to 4), plus 0.5 for stopping (an end-of-sequence
token) within the limit. The best policy keeps several words in play and stops; a policy collapsed
onto one word, or onto stopping at once, earns a fraction of the maximum (2.5). TRL's
`TensorBoardCallback` writes the event file, with the `args` text summary.

`--trainer rloo` trains with TRL's RLOOTrainer instead (the same generation and logging; the
advantage is each completion's reward minus the mean of the group's other completions, and `--beta`
is RLOO's KL penalty on the reward).

`--hidden-size` and `--layers` change the model's size (intermediate size twice the hidden size,
4 heads). `--reward` picks the reward functions; TRL sums them and logs each one's mean as
`rewards/<function name>/mean`:

    task               `reward` above, alone (the default)
    task+length_bonus  `reward` plus `length_bonus`, 0.05 per generated word whatever the word: a
                       gameable extra (64 words earn 3.2, more than the task's maximum 2.5), so
                       the policy can score by writing to the length limit while the task part
                       stalls or falls
    long_list          `long_list` alone, a task that legitimately asks for long answers: list up
                       to 48 good words and stop; 1/24 per good word (up to 48), minus 1/24 per
                       other word, plus 0.5 for stopping: at most 2.5
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from typing import Any

WORDS = [f"w{i}" for i in range(20)]
GOOD = set(WORDS[:8])


EOS_ID = 2


def reward(completions: list[str], completion_ids: list[list[int]], **_: Any) -> list[float]:
    """Share of good words, 0.25 per distinct good word up to 4, 0.5 for stopping: at most 2.5."""
    out = []
    for text, ids in zip(completions, completion_ids, strict=True):
        words = text.split()
        good = [w for w in words if w in GOOD]
        share = len(good) / max(1, len(words))
        stopped = 0.5 if EOS_ID in ids else 0.0
        out.append(share + 0.25 * min(4, len(set(good))) + stopped)
    return out


BONUS = 0.05


def length_bonus(completions: list[str], **_: Any) -> list[float]:
    """BONUS per generated word: rewards length for its own sake (3.2 at 64 words)."""
    return [BONUS * len(text.split()) for text in completions]


def long_list(completions: list[str], completion_ids: list[list[int]], **_: Any) -> list[float]:
    """+1/24 per good word (up to 48), -1/24 per other word, 0.5 for stopping: at most 2.5."""
    out = []
    for text, ids in zip(completions, completion_ids, strict=True):
        words = text.split()
        good = sum(w in GOOD for w in words)
        stopped = 0.5 if EOS_ID in ids else 0.0
        out.append((min(good, 48) - (len(words) - good)) / 24 + stopped)
    return out


REWARDS = {"task": [reward], "task+length_bonus": [reward, length_bonus], "long_list": [long_list]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-steps", type=int, default=120)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--num-iterations", type=int, default=1)
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--epsilon", type=float, default=0.2)
    parser.add_argument("--lr-scheduler-type", default="constant")
    parser.add_argument("--hidden-size", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--reward", choices=sorted(REWARDS), default="task")
    parser.add_argument("--trainer", choices=("grpo", "rloo"), default="grpo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--progress-bar",
        action="store_true",
        help="keep the Trainer's tqdm bar (its default): the console then shows the bar and "
        "prints the logs with tqdm.write, as a default configuration does",
    )
    parser.add_argument(
        "--logging-steps",
        type=int,
        default=1,
        help="the Trainer's logging_steps (its console prints no step: a reader must be told)",
    )
    args = parser.parse_args(argv)

    import os

    import torch
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
    )
    tokenizer.padding_side = "left"
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=args.hidden_size,
        intermediate_size=2 * args.hidden_size,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=EOS_ID,
    )
    # saved and passed by path: TRL loads the frozen reference model (beta > 0) from the same place
    init_dir = os.path.join(args.out, "trainer", "init_model")
    LlamaForCausalLM(config).save_pretrained(init_dir)
    tokenizer.save_pretrained(init_dir)

    rng = random.Random(args.seed)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(512)]
    os.environ["TENSORBOARD_LOGGING_DIR"] = args.out
    config_class, trainer_class = {
        "grpo": (GRPOConfig, GRPOTrainer),
        "rloo": (RLOOConfig, RLOOTrainer),
    }[args.trainer]
    cfg = config_class(
        output_dir=os.path.join(args.out, "trainer"),
        report_to=["tensorboard"],
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        lr_scheduler_type=args.lr_scheduler_type,
        num_iterations=args.num_iterations,
        beta=args.beta,
        epsilon=args.epsilon,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=64,
        logging_steps=args.logging_steps,
        save_strategy="no",
        use_cpu=True,
        seed=args.seed,
        disable_tqdm=not args.progress_bar,
    )
    trainer = trainer_class(
        model=init_dir,
        reward_funcs=REWARDS[args.reward],
        args=cfg,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
    )
    trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
