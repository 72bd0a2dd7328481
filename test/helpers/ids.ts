// Job ids for tests that write the run store directly: the store reads back only ids in the job
// table's alphabet (six characters, no 0 o 1 l), as the table hands them out.
const ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789';

/** The n-th id starting with `first` (a letter of the alphabet): n below 32^5. */
export function jobId(first: string, n: number): string {
  let id = '';
  for (let rest = n, i = 0; i < 5; i++, rest = Math.floor(rest / 32)) id = ALPHABET[rest % 32]! + id;
  return first + id;
}
