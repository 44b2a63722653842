// Preloaded into the Portkey gateway (node --import): its start-server listens on every interface and takes no host
// option, so every server it opens is bound to 127.0.0.1 instead (the bench stays on loopback).
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || typeof args[0] === 'string') {
    const port = args[0];
    const rest = args.slice(1).filter((a) => typeof a === 'function');
    return listen.call(this, { port: Number(port), host: '127.0.0.1' }, ...rest);
  }
  if (args[0] && typeof args[0] === 'object' && !('path' in args[0])) args[0] = { ...args[0], host: '127.0.0.1' };
  return listen.apply(this, args);
};
