/*
 * bcryptprimitives.dll for Wine before 8.13, which lacks it: Rust's standard
 * library (1.78 and later) imports ProcessPrng from it on Windows, so no Rust
 * test binary starts under Debian 12's Wine 8.0 without it. scripts/test.sh
 * builds it with mingw-w64 into its temporary Wine prefix, only when Wine has
 * no bcryptprimitives.dll of its own; nothing else uses it.
 *
 * ProcessPrng fills a buffer with random bytes and always succeeds (its
 * contract on Windows); here it draws them from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine implements.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
