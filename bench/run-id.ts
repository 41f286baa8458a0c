/**
 * This run's id and its progress log: what every scenario and helper shares of a run, with no
 * command line to parse (options.ts parses it when it is imported), so a helper that needs only
 * these can be imported by a test.
 */

/** A progress line on standard error (the tables go to standard output). */
export const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
/** This run's id: the prefix of every object it creates and the folder of its controllers' logs. */
export const RUN = `r${Date.now().toString(36)}`;
