/**
 * The logger every component takes by injection: pino's calling convention (an object of
 * structured fields first, then a message), so a pino logger fits as it is. Never pass values
 * read from sources in the fields: only names, reasons and counts.
 */
export interface Logger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
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
