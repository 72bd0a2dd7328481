// The client's file methods an ACP agent may call (`fs/read_text_file`, `fs/write_text_file`),
// confined to the job's folder: a path outside it, or led out of it by a link, is refused, and a
// write never goes through a link. A missing file reads as empty (what gemini needs to create one).
import { closeSync, constants, fstatSync, openSync, realpathSync, writeSync } from 'node:fs';
import { dirname, isAbsolute } from 'node:path';
import type { ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest } from '@agentclientprotocol/sdk';
import { isInside, makeDirs, readRegularFile } from '../../lib/fs.js';

/** The largest file an agent reads through the client. */
const MAX_READ_BYTES = 16 * 1024 * 1024;
const WRITE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export class OutsideFolder extends Error {}

/** The path with its links resolved, if it is absolute and inside `folder`; else OutsideFolder saying so. */
function confined(folder: string, path: string, method: string): string {
  if (!isAbsolute(path) || !isInside(folder, path)) {
    throw new OutsideFolder(`${method}: ${path} is outside the job's folder ${folder}: refused`);
  }
  return realOrSelf(path);
}

const realOrSelf = (path: string) => {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
};

export function readTextFile(folder: string, request: ReadTextFileRequest): ReadTextFileResponse {
  const path = confined(folder, request.path, 'fs/read_text_file');
  const text = readRegularFile(path, MAX_READ_BYTES);
  if (text !== undefined && typeof text !== 'string') throw new Error(`fs/read_text_file: ${path}: ${text.problem}`);
  if (text === undefined) return { content: '' };
  if (request.line == null && request.limit == null) return { content: text };
  const lines = text.split('\n');
  const first = Math.max(0, (request.line ?? 1) - 1);
  return { content: lines.slice(first, request.limit == null ? undefined : first + request.limit).join('\n') };
}

export function writeTextFile(folder: string, request: WriteTextFileRequest): void {
  const path = confined(folder, request.path, 'fs/write_text_file');
  makeDirs(dirname(path), 0o755);
  // Not through a link (O_NOFOLLOW), nor into a FIFO (O_NONBLOCK, then a regular file only).
  const fd = openSync(path, WRITE_FLAGS, 0o644);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`fs/write_text_file: ${path} is not a regular file`);
    writeSync(fd, request.content);
  } finally {
    closeSync(fd);
  }
}
