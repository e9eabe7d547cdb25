// How the CPU time of a piece of work grows with its input, for the performance guards: this process's CPU time,
// which a loaded machine does not stretch as it stretches the wall clock, and the ratio of two input sizes measured
// here and now, never a budget in milliseconds.

/** Calls are repeated until the smaller input has used this much CPU, so timer resolution and noise stay small. */
const MIN_MEASURED_CPU_MS = 20;
const MAX_REPEATS = 1 << 20;
/** The ratio is the median of this many rounds, each of both inputs in turn. */
const ROUNDS = 5;

/** CPU time (user + system, every thread of this process) of `times` calls of `run`, in ms. */
export function cpuMs(run: () => unknown, times = 1): number {
  const before = process.cpuUsage();
  for (let i = 0; i < times; i++) run();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1_000;
}

/** The CPU time of `large` over that of `small`, both called alike: the median of ROUNDS rounds. */
export function cpuGrowth(small: () => unknown, large: () => unknown): number {
  small();
  large();
  let repeats = 1;
  while (repeats < MAX_REPEATS && cpuMs(small, repeats) < MIN_MEASURED_CPU_MS) repeats *= 2;
  const ratios: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const base = Math.max(cpuMs(small, repeats), Number.EPSILON);
    ratios.push(cpuMs(large, repeats) / base);
  }
  return ratios.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)] as number;
}
