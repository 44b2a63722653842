import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { decodeKey } from '../config/config.ts';
import { pooledRandomBytes } from './ids.ts';

/** Encryption at rest of webhook signing secrets (they must be recovered to sign, so they cannot be hashed). */
export interface SecretBox {
  /** `aad` binds the ciphertext to its row (the webhook id): a ciphertext copied onto another row does not open. */
  seal(plaintext: string, aad: string): string;
  open(sealed: string, aad: string): string;
}

export const KEY_FILE_NAME = 'webhook-secrets.key';

/** 12 random bytes, copied out of the shared pool (kernel/ids.ts): the IV is written out with the ciphertext. */
const nextIv = (): Buffer => Buffer.from(pooledRandomBytes(12));

/** AES-256-GCM; stored as `iv.tag.ciphertext`, each base64url (prisma/schema.prisma, Webhook.secretEncrypted). */
export class AesGcmSecretBox implements SecretBox {
  /** Imported once: a raw key Buffer would be imported again by every createCipheriv. */
  private readonly key: KeyObject;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('the webhook secret key must be 32 bytes');
    this.key = createSecretKey(key);
  }

  seal(plaintext: string, aad: string): string {
    const iv = nextIv();
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const head = cipher.update(plaintext, 'utf8');
    const tail = cipher.final();
    const ct = tail.length === 0 ? head : Buffer.concat([head, tail]);
    return `${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${ct.toString('base64url')}`;
  }

  open(sealed: string, aad: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 3) throw new Error('malformed sealed secret');
    const [iv, tag, ct] = parts.map((p) => Buffer.from(p, 'base64url'));
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv!);
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(tag!);
    return Buffer.concat([decipher.update(ct!), decipher.final()]).toString('utf8');
  }
}

/**
 * The key comes from SVC_ENCRYPTION_KEY, else from `<SVC_DATA_DIR>/webhook-secrets.key`, generated on first use with
 * mode 0600 (the embedded default). Loaded lazily, so a process that never touches a webhook creates no file.
 */
export function createSecretBox(opts: { encryptionKey: string | null; dataDir: string; onGenerated?: (file: string) => void }): SecretBox {
  let box: AesGcmSecretBox | null = null;
  const get = (): AesGcmSecretBox => {
    if (!box) {
      const key = opts.encryptionKey !== null ? decodeKey(opts.encryptionKey) : loadOrCreateKeyFile(opts.dataDir, opts.onGenerated);
      if (!key) throw new Error('SVC_ENCRYPTION_KEY: must be 32 bytes as 64 hex characters or base64');
      box = new AesGcmSecretBox(key);
    }
    return box;
  };
  return { seal: (p, aad) => get().seal(p, aad), open: (s, aad) => get().open(s, aad) };
}

export function loadOrCreateKeyFile(dataDir: string, onGenerated?: (file: string) => void): Buffer {
  const file = path.join(dataDir, KEY_FILE_NAME);
  if (!existsSync(file)) createKeyFile(dataDir, file, onGenerated);
  const key = decodeKey(readFileSync(file, 'utf8').trim());
  if (!key) throw new Error(`${file}: not a 32-byte key (64 hex characters)`);
  return key;
}

function createKeyFile(dataDir: string, file: string, onGenerated?: (file: string) => void): void {
  mkdirSync(dataDir, { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(tmp, randomBytes(32).toString('hex') + '\n', { mode: 0o600 });
  try {
    // link() is atomic and fails when the file exists: exactly one of several processes starting together wins.
    linkSync(tmp, file);
    onGenerated?.(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
}
