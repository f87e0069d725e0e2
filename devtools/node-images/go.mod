module sparkdlq.local/node-images

go 1.22
