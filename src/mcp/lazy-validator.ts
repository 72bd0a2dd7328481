// The MCP server's JSON Schema validator, made on first use. The SDK's server builds an Ajv
// instance (with every format) as it is constructed, for elicitation replies, which polyspawn
// never requests: ~11 ms of every start-up (bench/coldstart.mjs) for nothing. This one builds
// the same validator the first time anything asks for it.
import type { jsonSchemaValidator } from '@modelcontextprotocol/server';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv';

export function lazyJsonSchemaValidator(): jsonSchemaValidator {
  let real: AjvJsonSchemaValidator | undefined;
  return { getValidator: (schema) => (real ??= new AjvJsonSchemaValidator()).getValidator(schema) };
}
