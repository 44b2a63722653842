import { Type } from 'typebox';
import { says } from '../../config/schema-errors.ts';

/** Input pieces the verticals share (Risk, Ops; Dev and Legal to come). */

/** Non-blank text of at most `max` characters. */
export const Text = (max: number, description: string) =>
  Type.String({ minLength: 1, maxLength: max, pattern: '\\S', description, ...says(`must be a non-empty string of at most ${max} characters`) });

/** Free-form string metadata, as on inference requests. */
export const Metadata = Type.Record(
  Type.String({ maxLength: 64 }),
  Type.String({ maxLength: 500 }),
  { description: 'Up to 50 string values of your own.', maxProperties: 50, ...says('must be an object of at most 50 string values of at most 500 characters') },
);

/** Optional free instructions for the model work. */
export const Instructions = Type.Optional(Text(4000, 'Extra instructions for the model, added to the built-in prompt.'));
