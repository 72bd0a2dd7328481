// Job ids for tests that write the run store directly: the store reads back only ids in the job
// table's alphabet (six characters, no 0 o 1 l), as the table hands them out.

/** The n-th id starting with `first` (a letter of the alphabet): n below 32^5. Self-contained: a child process's script can hold its source. */
export function jobId(first: string, n: number): string {
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  let id = '';
  for (let rest = n, i = 0; i < 5; i++, rest = Math.floor(rest / 32)) id = alphabet[rest % 32]! + id;
  return first + id;
}
