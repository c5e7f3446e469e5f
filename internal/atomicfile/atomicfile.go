// Package atomicfile writes files that others may read at any moment (a task's state in its
// bundle, a shim's address file, hcsemu's --tcp-address-file), so that a reader sees the old
// content or the new, never a half-written file: the content goes to a temporary file in the
// same folder, which is then renamed over the target (an atomic replace on Linux, and on
// Windows, where os.Rename uses MoveFileEx with MOVEFILE_REPLACE_EXISTING).
//
// It imports nothing of runhcs.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to path with permission perm, atomically as described above. The
// temporary file has a unique name, so concurrent writers do not trample each other's.
func WriteFile(path string, data []byte, perm os.FileMode) (retErr error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if retErr != nil {
			os.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
