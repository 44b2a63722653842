import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from 'pino';

/**
 * A request's logger, made only when the request logs something. Fastify gives every request a child logger bound to
 * its request id; pino makes one with its bindings serialized (and redaction set up) at once, which showed in the hot
 * path's profile although a request that goes well logs nothing (request logging is off). This one forwards to the
 * real child, created on the first call.
 */
class LazyRequestLogger {
  private made: FastifyBaseLogger | null = null;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  get level(): LevelWithSilentOrString {
    return this.parent.level;
  }
  set level(level: LevelWithSilentOrString) {
    this.real.level = level;
  }
  fatal(...args: unknown[]): void {
    (this.real.fatal as (...a: unknown[]) => void)(...args);
  }
  error(...args: unknown[]): void {
    (this.real.error as (...a: unknown[]) => void)(...args);
  }
  warn(...args: unknown[]): void {
    (this.real.warn as (...a: unknown[]) => void)(...args);
  }
  info(...args: unknown[]): void {
    (this.real.info as (...a: unknown[]) => void)(...args);
  }
  debug(...args: unknown[]): void {
    (this.real.debug as (...a: unknown[]) => void)(...args);
  }
  trace(...args: unknown[]): void {
    (this.real.trace as (...a: unknown[]) => void)(...args);
  }
  silent(): void {}
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

export const lazyRequestLogger = (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger =>
  new LazyRequestLogger(logger, bindings, options) as unknown as FastifyBaseLogger;
