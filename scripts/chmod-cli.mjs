// tsc does not set the executable bit on the command's entry point.
import { chmodSync } from 'node:fs';
chmodSync('dist/src/cli.js', 0o755);
