package soak

import (
	"testing"

	"github.com/openhcs/runhcs/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
