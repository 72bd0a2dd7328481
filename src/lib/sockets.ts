// Which local process holds which TCP socket, from Linux's /proc: the shared server tells an
// agent's connection from a client's by the process at its other end, and the stdio relay proves
// that the process daemon.json names listens on its port before it sends it anything.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

type AddressKind = 'loopback' | 'any' | 'other';

type TcpSocket = {
  family: 4 | 6;
  localKind: AddressKind;
  localPort: number;
  remotePort: number;
  /** /proc's state code: '01' established, '0A' listening. */
  state: string;
  inode: string;
};

export const LISTENING = '0A';

/**
 * The TCP sockets of the network namespace `pid` is in (/proc/<pid>/net/tcp and tcp6), or
 * undefined where there is no /proc to read them from.
 */
export function tcpSockets(pid: number | 'self' = 'self'): TcpSocket[] | undefined {
  const sockets: TcpSocket[] = [];
  let read = false;
  for (const [file, family] of [
    ['tcp', 4],
    ['tcp6', 6],
  ] as const) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${file}`, 'utf8');
      read = true;
    } catch {
      continue;
    }
    // "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ..."
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const [localHex, localPort] = fields[1]!.split(':');
      const remotePort = fields[2]!.split(':')[1];
      sockets.push({
        family,
        localKind: addressKind(localHex!),
        localPort: parseInt(localPort!, 16),
        remotePort: parseInt(remotePort!, 16),
        state: fields[3]!,
        inode: fields[9]!,
      });
    }
  }
  return read ? sockets : undefined;
}

/** An address as /proc writes it (hex, each 32-bit word in host order, little-endian here). */
function addressKind(hex: string): AddressKind {
  const bytes: number[] = [];
  for (let word = 0; word < hex.length; word += 8)
    for (let at = word + 6; at >= word; at -= 2) bytes.push(parseInt(hex.slice(at, at + 2), 16));
  // An IPv4 address mapped into IPv6 (::ffff:a.b.c.d) is that IPv4 address.
  const v4 =
    bytes.length === 4
      ? bytes
      : bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff
        ? bytes.slice(12)
        : undefined;
  if (v4) return v4[0] === 127 ? 'loopback' : v4.every((b) => b === 0) ? 'any' : 'other';
  if (bytes.every((b) => b === 0)) return 'any';
  return bytes.slice(0, 15).every((b) => b === 0) && bytes[15] === 1 ? 'loopback' : 'other';
}

/** The socket inodes a process holds open (empty when its fds are not ours to read, or it is gone). */
export function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return inodes;
  }
  for (const fd of fds) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith('socket:[')) inodes.add(target.slice(8, -1));
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/**
 * The process that holds the other end of this process's TCP connection from `remotePort` to
 * `localPort`: 'no-proc' where there is no /proc; 'unidentified' when no process whose fds we may
 * read holds it (another user's, a container's, or one that has exited since). Only the
 * connecting process and what it forked or handed the socket to hold it, so the first found
 * answers; the newest pids are looked at first, where a fresh connection's process usually is.
 */
export function connectionPeer(localPort: number, remotePort: number): number | 'unidentified' | 'no-proc' {
  const sockets = tcpSockets();
  if (!sockets) return 'no-proc';
  const inodes = new Set(
    sockets
      .filter((s) => s.localPort === remotePort && s.remotePort === localPort && s.inode !== '0')
      .map((s) => s.inode),
  );
  if (inodes.size === 0) return 'unidentified';
  const pids = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .sort((a, b) => b - a);
  for (const pid of pids) {
    if (pid !== process.pid && [...socketInodes(pid)].some((inode) => inodes.has(inode))) return pid;
  }
  return 'unidentified';
}

/**
 * Whether a host name or address is this machine's loopback: `localhost`, `::1` (bracketed as in a
 * URL, or not), 127.x.x.x, and 127.x.x.x mapped into IPv6 (how a socket reports a v4 peer on a
 * dual-stack listener).
 */
export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const bare = host.replace(/^\[(.*)\]$/, '$1').replace(/^::ffff:/i, '');
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare);
}
