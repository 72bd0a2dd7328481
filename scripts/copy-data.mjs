// tsc does not copy data files; the models table ships beside the compiled backends.
import { copyFileSync, chmodSync } from 'node:fs';
copyFileSync('backends/models.json', 'dist/backends/models.json');
chmodSync('dist/src/cli.js', 0o755);
