// Package wclayer owns the Windows layer format: the on-disk layout of a layer folder
// (Files/, Hives/, UtilityVM/, layerchain.json), import and export of OCI Windows layer tars,
// and the storage-filter API that mounts a chain of layers as one volume.
package wclayer
