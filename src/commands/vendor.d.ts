// write-file-atomic ships no types, and @types/write-file-atomic describes an older version.
declare module 'write-file-atomic' {
  type Options = {
    encoding?: BufferEncoding;
    mode?: number;
    chown?: { uid: number; gid: number } | false;
    fsync?: boolean;
    tmpfileCreated?: (tmp: string) => unknown;
  };
  function writeFileAtomic(filename: string, data: string | Uint8Array, options?: Options): Promise<void>;
  namespace writeFileAtomic {
    function sync(filename: string, data: string | Uint8Array, options?: Options): void;
  }
  export default writeFileAtomic;
}
