/* winecompat.h: see winecompat.c. */
#ifndef RUNHCS_WINECOMPAT_H
#define RUNHCS_WINECOMPAT_H

#include <windows.h>

/* winecompat_install patches what Go programs need from Wine 8; FALSE if it could not. */
BOOL winecompat_install(void);

#endif
