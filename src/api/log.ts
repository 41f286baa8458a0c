/**
 * The logger every component takes by injection: pino's calling convention (an object of
 * structured fields first, then a message), so a pino logger fits as it is. Never pass values
 * read from sources in the fields: only names, reasons and counts.
 */
export interface Logger {
  /** Logs `message` with structured `fields` at debug level. */
  debug(fields: Record<string, unknown>, message: string): void;
  /** Logs `message` with structured `fields` at info level. */
  info(fields: Record<string, unknown>, message: string): void;
  /** Logs `message` with structured `fields` at warn level. */
  warn(fields: Record<string, unknown>, message: string): void;
  /** Logs `message` with structured `fields` at error level. */
  error(fields: Record<string, unknown>, message: string): void;
  /** A logger that adds `fields` to every line, where supported (pino's `child`). */
  child?(fields: Record<string, unknown>): Logger;
}

/** A logger that drops everything: the default of the library. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** `logger.child(fields)` where supported, else the logger itself. */
export function childLogger(logger: Logger, fields: Record<string, unknown>): Logger {
  return logger.child ? logger.child(fields) : logger;
}
