"""A Minigo-style self-play workload: a pool of worker processes each plays games of a small
board game with a Monte-Carlo tree search whose leaves are evaluated by a numpy network, while
the main process waits, then trains on the collected positions (RL-Scope appendix B.2).

    strato record -o prof -- python examples/selfplay.py --workers 4
    strato breakdown prof          # one breakdown per worker process

Workers start with the ``fork`` start method by default (``--start spawn`` for spawn); each
records its own ``<pid>.strato`` file into the same profile.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing as mp

import numpy as np

try:
    import stratoscope as rls
except ImportError:
    rls = None

N = 5  # board N x N, players place stones; a game ends when the board is full


def operation(name):
    return rls.operation(name) if rls is not None else contextlib.nullcontext()


def evaluate(weights, boards):
    """The 'network': value and policy of a minibatch of boards."""
    h = np.tanh(boards.reshape(len(boards), -1) @ weights[0])
    return np.tanh(h @ weights[1])[:, 0], h @ weights[2]


class Node:
    __slots__ = ("board", "player", "children", "visits", "value", "prior")

    def __init__(self, board, player, prior=1.0):
        self.board, self.player, self.prior = board, player, prior
        self.children: dict[int, "Node"] = {}
        self.visits, self.value = 0, 0.0


def mcts_move(root: Node, weights, sims: int, rng) -> int:
    for _ in range(sims):
        with operation("mcts_tree_search"):
            node, path = root, [root]
            while node.children:
                total = math.sqrt(node.visits + 1)
                best, best_score = None, -1e9
                for move, child in node.children.items():
                    q = child.value / (child.visits + 1e-9) if child.visits else 0.0
                    score = q + 1.5 * child.prior * total / (1 + child.visits)
                    if score > best_score:
                        best, best_score = move, score
                node = node.children[best]
                path.append(node)
            with operation("expand_leaf"):
                value, logits = evaluate(weights, node.board[None])
                empty = np.flatnonzero(node.board.ravel() == 0)
                if len(empty):
                    p = np.exp(logits[0][empty] - logits[0][empty].max())
                    p /= p.sum()
                    for move, prior in zip(empty.tolist(), p.tolist()):
                        child_board = node.board.copy()
                        child_board.flat[move] = node.player
                        node.children[move] = Node(child_board, -node.player, prior)
            for n in reversed(path):
                n.visits += 1
                n.value += float(value[0]) * n.player
    return max(root.children.items(), key=lambda kv: kv[1].visits)[0]


def play_games(args) -> list:
    worker, games, sims, seed = args
    if rls is not None:
        rls.set_process_name(f"selfplay-worker-{worker}")
        rls.set_phase("self_play")
    rng = np.random.default_rng(seed + worker)
    weights = [rng.normal(0, 0.3, (N * N, 32)), rng.normal(0, 0.3, (32, 1)),
               rng.normal(0, 0.3, (32, N * N))]
    positions = []
    for _ in range(games):
        board, player = np.zeros((N, N)), 1.0
        for _ in range(N * N):
            move = mcts_move(Node(board, player), weights, sims, rng)
            positions.append(board.copy())
            board = board.copy()
            board.flat[move] = player
            player = -player
    return positions


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--games", type=int, default=2)
    p.add_argument("--sims", type=int, default=24)
    p.add_argument("--start", choices=["fork", "spawn"], default="fork")
    args = p.parse_args()
    if rls is not None:
        rls.set_process_name("selfplay-main")
        rls.set_phase("data_collection")
    ctx = mp.get_context(args.start)
    pool = ctx.Pool(args.workers)
    results = pool.map(play_games, [(w, args.games, args.sims, 0) for w in range(args.workers)])
    # close + join (not terminate): workers exit normally and flush their recordings.
    pool.close()
    pool.join()
    positions = np.array([b for r in results for b in r])
    if rls is not None:
        rls.set_phase("sgd_updates")
    with operation("sgd_update"):
        w = np.zeros((N * N, 1))
        x = positions.reshape(len(positions), -1)
        y = np.sign(x.sum(axis=1, keepdims=True))
        for _ in range(50):
            w -= 0.01 * x.T @ (x @ w - y) / len(x)
    print(f"{len(positions)} positions from {args.workers} workers")


if __name__ == "__main__":
    main()
