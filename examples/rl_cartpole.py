"""An RL training loop on gymnasium's CartPole: a small numpy Q-network (DQN-style), with the
three RL-Scope operations annotated: inference, simulation and backpropagation.

Run it plain (``python examples/rl_cartpole.py``), or under stratoscope:

    strato record -o prof -- python examples/rl_cartpole.py
    strato record --calibrate --json -o prof -- python examples/rl_cartpole.py --steps 3000

The annotations are no-ops when stratoscope is not installed or not recording.
"""

from __future__ import annotations

import argparse
import contextlib

import gymnasium as gym
import numpy as np

try:
    import stratoscope as rls
except ImportError:  # the example runs without stratoscope too
    rls = None


def operation(name):
    return rls.operation(name) if rls is not None else contextlib.nullcontext()


class QNet:
    """A 2-layer MLP trained with plain SGD on the TD error."""

    def __init__(self, n_in: int, n_hidden: int, n_out: int, rng: np.random.Generator):
        self.w1 = rng.normal(0, 1 / np.sqrt(n_in), (n_in, n_hidden))
        self.b1 = np.zeros(n_hidden)
        self.w2 = rng.normal(0, 1 / np.sqrt(n_hidden), (n_hidden, n_out))
        self.b2 = np.zeros(n_out)

    def forward(self, x):
        h = np.maximum(x @ self.w1 + self.b1, 0.0)
        return h, h @ self.w2 + self.b2

    def sgd(self, x, actions, targets, lr: float) -> float:
        h, q = self.forward(x)
        idx = np.arange(len(actions))
        err = q[idx, actions] - targets
        dq = np.zeros_like(q)
        dq[idx, actions] = err / len(actions)
        dw2 = h.T @ dq
        dh = (dq @ self.w2.T) * (h > 0)
        dw1 = x.T @ dh
        self.w2 -= lr * dw2
        self.b2 -= lr * dq.sum(axis=0)
        self.w1 -= lr * dw1
        self.b1 -= lr * dh.sum(axis=0)
        return float(np.mean(err**2))


def train(steps: int, batch: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    env = gym.make("CartPole-v1")
    net = QNet(4, 64, 2, rng)
    buf_s = np.zeros((10_000, 4))
    buf_a = np.zeros(10_000, dtype=np.int64)
    buf_r = np.zeros(10_000)
    buf_s2 = np.zeros((10_000, 4))
    buf_d = np.zeros(10_000)
    n = 0
    state, _ = env.reset(seed=seed)
    eps, gamma, loss = 1.0, 0.99, 0.0
    if rls is not None:
        rls.set_phase("training")
    for t in range(steps):
        with operation("inference"):
            if rng.random() < eps:
                action = int(rng.integers(2))
            else:
                _, q = net.forward(state[None, :])
                action = int(np.argmax(q[0]))
        with operation("simulation"):
            next_state, reward, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                next_state_for_buf = next_state
                next_state, _ = env.reset()
            else:
                next_state_for_buf = next_state
        i = n % len(buf_r)
        buf_s[i], buf_a[i], buf_r[i], buf_s2[i], buf_d[i] = (
            state, action, reward, next_state_for_buf, float(terminated))
        n += 1
        state = next_state
        eps = max(0.05, eps * 0.995)
        if n >= batch:
            with operation("backpropagation"):
                idx = rng.integers(0, min(n, len(buf_r)), batch)
                _, q2 = net.forward(buf_s2[idx])
                target = buf_r[idx] + gamma * (1 - buf_d[idx]) * q2.max(axis=1)
                loss = net.sgd(buf_s[idx], buf_a[idx], target, 1e-3)
    env.close()
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    loss = train(args.steps, args.batch, args.seed)
    print(f"final TD loss {loss:.4f}")


if __name__ == "__main__":
    main()
