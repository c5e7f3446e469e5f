package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The Win32 backup stream format, as BackupRead and BackupWrite frame a file's contents and as
// hcsshim's legacy layer format stores every file under Files\ (internal/wclayer/legacy.go):
// a sequence of WIN32_STREAM_ID headers — stream id, attributes, size (little endian: DWORD,
// DWORD, LARGE_INTEGER), the stream name's length in bytes and the name in UTF-16 — each
// followed by its data ([MS-BKUP] 2.1, and WIN32_STREAM_ID in
// https://learn.microsoft.com/windows/win32/api/winbase/ns-winbase-win32_stream_id). go-winio's
// BackupStreamReader and BackupStreamWriter, which write these files, put no padding between
// streams, and neither does this codec.

// Stream ids of WIN32_STREAM_ID (winbase.h).
const (
	backupData          = 1
	backupEAData        = 2
	backupSecurity      = 3
	backupAlternateData = 4
	backupLink          = 5
	backupReparseData   = 8
	backupSparseBlock   = 9
)

// backupStreamHeaderSize is WIN32_STREAM_ID's size without its name.
const backupStreamHeaderSize = 20

// backupStream is one stream of a backup stream: its id, name and where its data lies.
type backupStream struct {
	ID     uint32
	Name   []byte // UTF-16LE, as stored
	Offset int64  // of the data, from the start of the reader given to readBackupStreams
	Size   int64
}

// maxBackupMeta bounds a stream that is read into memory (security descriptors, reparse data):
// Windows caps a security descriptor at 64 KiB and reparse data at 16 KiB
// (MAXIMUM_REPARSE_DATA_BUFFER_SIZE).
const maxBackupMeta = 64 << 10

// readBackupStreams lists the streams of the backup stream in r, which ends at size. A header
// that runs past the end, or a stream whose size does, is an error naming its offset.
func readBackupStreams(r io.ReaderAt, size int64) ([]backupStream, error) {
	var out []backupStream
	var hdr [backupStreamHeaderSize]byte
	for off := int64(0); off < size; {
		if size-off < backupStreamHeaderSize {
			return nil, fmt.Errorf("backup stream: truncated header at offset %d", off)
		}
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			return nil, fmt.Errorf("backup stream: reading header at offset %d: %w", off, err)
		}
		s := backupStream{
			ID:   binary.LittleEndian.Uint32(hdr[0:4]),
			Size: int64(binary.LittleEndian.Uint64(hdr[8:16])),
		}
		nameSize := int64(binary.LittleEndian.Uint32(hdr[16:20]))
		off += backupStreamHeaderSize
		if nameSize > 0 {
			if nameSize > 2*32767 || off+nameSize > size {
				return nil, fmt.Errorf("backup stream: stream name of %d bytes at offset %d runs past the end", nameSize, off)
			}
			s.Name = make([]byte, nameSize)
			if _, err := r.ReadAt(s.Name, off); err != nil {
				return nil, fmt.Errorf("backup stream: reading stream name at offset %d: %w", off, err)
			}
			off += nameSize
		}
		if s.ID == backupSparseBlock {
			return nil, errors.New("backup stream: sparse blocks are not supported")
		}
		if s.Size < 0 || s.Size > size-off {
			return nil, fmt.Errorf("backup stream: stream %d of %d bytes at offset %d runs past the end", s.ID, s.Size, off)
		}
		s.Offset = off
		off += s.Size
		out = append(out, s)
	}
	return out, nil
}

// readStreamData reads a small stream (security descriptor, reparse data) into memory.
func readStreamData(r io.ReaderAt, s backupStream) ([]byte, error) {
	if s.Size > maxBackupMeta {
		return nil, fmt.Errorf("backup stream: stream %d is %d bytes, more than %d", s.ID, s.Size, maxBackupMeta)
	}
	b := make([]byte, s.Size)
	if _, err := r.ReadAt(b, s.Offset); err != nil {
		return nil, err
	}
	return b, nil
}

// writeBackupStreamHeader writes one unnamed stream's WIN32_STREAM_ID (attributes 0, as
// go-winio's BackupStreamWriter writes them).
func writeBackupStreamHeader(w io.Writer, id uint32, size int64) error {
	var hdr [backupStreamHeaderSize]byte
	binary.LittleEndian.PutUint32(hdr[0:4], id)
	binary.LittleEndian.PutUint64(hdr[8:16], uint64(size))
	_, err := w.Write(hdr[:])
	return err
}
