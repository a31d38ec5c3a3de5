"""Env throughput: lero's batched MPE envs vs mpe2's parallel_env, measured in one run.

    python -m benchmarks.env_throughput                       # every env, B=4096, 1 and 2 threads
    python -m benchmarks.env_throughput --env simple_reference simple_speaker_listener --threads 1
    python -m benchmarks.env_throughput --n-envs 256 1024 4096 --threads 2 --seconds 10
    python -m benchmarks.env_throughput --train mappo --train-steps 200000

Absolute numbers depend on what else the machine runs; compare the ratio column.

Threads wait between torch ops the way the `lero` command's do (`training.openmp`),
unless the caller chose an OpenMP wait; that must be settled before torch is imported,
hence the late import in main().
"""

from __future__ import annotations

import argparse

from lero.training.openmp import settle_openmp_wait

settle_openmp_wait()

SPREAD = "simple_spread"
SETTINGS = {  # simple_spread's observability settings; the other envs take no arguments here
    "full": {},
    "partial": {"num_agent_neighbors": 1, "num_landmark_neighbors": 2},  # LERO's default setting
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", nargs="+", help="environments (default: every registered one)")
    parser.add_argument("--n-envs", type=int, nargs="+", default=[4096])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--obs", choices=sorted(SETTINGS), nargs="+", default=["full", "partial"])
    parser.add_argument("--N", type=int, default=3, help="simple_spread agents (= landmarks)")
    parser.add_argument("--seconds", type=float, default=6.0, help="measuring time per row")
    parser.add_argument(
        "--train", metavar="ALGO", help="also time training.train with this algorithm"
    )
    parser.add_argument("--train-steps", type=int, default=200_000)
    args = parser.parse_args()
    from lero.training.bench import bench_env, bench_train, format_table
    from lero.training.envs import ENV_NAMES

    settings = []
    for env in args.env or ENV_NAMES:
        if env == SPREAD:
            settings += [(env, {"N": args.N, **SETTINGS[obs]}) for obs in args.obs]
        else:
            settings.append((env, {}))
    rows = []
    for env, kwargs in settings:
        for threads in args.threads:
            for n_envs in args.n_envs:
                rows.append(
                    bench_env(
                        n_envs,
                        seconds=args.seconds,
                        env_kwargs=kwargs,
                        threads=threads,
                        env_name=env,
                    )
                )
                print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    if args.train:
        for threads in args.threads:
            rows.append(
                bench_train(
                    args.train,
                    steps=args.train_steps,
                    env_kwargs=SETTINGS["partial"],
                    threads=threads,
                )
            )
    print()
    print(format_table(rows))


if __name__ == "__main__":
    main()
