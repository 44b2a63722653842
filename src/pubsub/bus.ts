import { EventEmitter } from 'node:events';

export type BusHandler = (message: string) => void;

/**
 * Cross-replica notifications (key revocation, limit changes, webhook wake-ups). With Redis: pub/sub on a dedicated
 * subscriber connection (RedisBus, redis/bus.ts). Without Redis there is one replica, but possibly several app
 * instances in one process (tests), so the in-process bus is shared process-wide.
 */
export interface Bus {
  publish(channel: string, message: string): Promise<void>;
  subscribe(channel: string, handler: BusHandler): void;
  /** Called after a reconnect: messages may have been missed, so caches must drop everything. */
  onResync(handler: () => void): void;
  close(): Promise<void>;
}

const processBus = new EventEmitter();
processBus.setMaxListeners(0);

export class LocalBus implements Bus {
  private readonly subs: [string, BusHandler][] = [];
  constructor(private readonly prefix: string) {}
  async publish(channel: string, message: string): Promise<void> {
    processBus.emit(this.prefix + channel, message);
  }
  subscribe(channel: string, handler: BusHandler): void {
    processBus.on(this.prefix + channel, handler);
    this.subs.push([this.prefix + channel, handler]);
  }
  onResync(): void {}
  async close(): Promise<void> {
    for (const [channel, handler] of this.subs) processBus.off(channel, handler);
  }
}
