/* ProcessPrng, which Rust's std on Windows calls for random bytes, for
 * Wine 8 (Debian 12), whose bcryptprimitives.dll lacks it. Built and used
 * by scripts/windows-tests.sh only; never shipped. */
#include <windows.h>
#include <ntsecapi.h>
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!RtlGenRandom(data, n)) return FALSE;
    data += n; len -= n;
  }
  return TRUE;
}
