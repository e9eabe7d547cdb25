// What a command may touch of the process: main.ts builds it from process.* and is the only file
// that reads argv, env, signals or exit codes.

export interface CliIo {
  /** isTTY: a person is watching (main.ts passes process.stdout): shorthand logs and the start banner. */
  readonly stdout: { write(text: string): unknown; readonly isTTY?: boolean | undefined };
  readonly stderr: { write(text: string): unknown };
  /** Standard input, for commands that read a file named `-` (policy explain --from-event -). */
  readonly stdin?: AsyncIterable<string | Uint8Array>;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Aborted on SIGTERM/SIGINT; long-running commands drain and return when it fires. */
  readonly signal: AbortSignal;
  /** Epoch milliseconds. */
  readonly now: () => number;
  /**
   * The drain has begun: the process must be gone `ms` from now. main.ts exits it then with EXIT_DRAIN_FORCED,
   * whatever still holds the event loop; a drain that closed everything exits long before.
   */
  readonly exitDeadline?: (ms: number) => void;
  /** `boundary run` without metrics (no-op recorders): set only by the benchmark's entry, bench/proxy/boundary-metrics-off.mjs. */
  readonly metricsOff?: boolean;
}

/**
 * `boundary run` drained only by destroying what was still open at the deadline (boundary-shutdown.ts SHUTDOWN_DRAIN_MS).
 * Handles may be left, so main.ts exits the process itself on this code instead of waiting for the event loop.
 */
export const EXIT_DRAIN_FORCED = 3;

/** A subcommand: parses its own arguments, returns the process exit code. */
export type Command = (argv: readonly string[], io: CliIo) => Promise<number>;
