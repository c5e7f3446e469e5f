package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// WriteJSON writes v as JSON to path, atomically as WriteFile does: the one way a record (a
// task's or a sandbox's state in its bundle) reaches disk.
func WriteJSON(path string, v any, perm os.FileMode) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFile(path, b, perm)
}

// ReadJSON reads the JSON record at path into v. It reports false, and no error, when there is
// no such file, so that a record that was never written (or was removed) is not an error.
func ReadJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", path, err)
	}
	return true, nil
}
