// Command probe is the test image of the test bed's node: one static binary whose subcommands
// check, from inside a pod, what the cluster tests assert (DNS, Services, the API server with
// the pod's service-account token, the Kafka broker's advertised address). Each subcommand
// prints what it found and exits non-zero when the check fails, so a test can read either.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) < 2 {
		fail("usage: probe serve|tcp|resolve|kube-api|kafka-metadata|hostname ...")
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(args)
	case "tcp":
		err = dialLine(args)
	case "resolve":
		err = resolve(args)
	case "kube-api":
		err = kubeAPI(args)
	case "kafka-metadata":
		err = kafkaMetadata(args)
	case "hostname":
		var name string
		name, err = os.Hostname()
		fmt.Println(name)
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "probe:", msg)
	os.Exit(1)
}

// serve answers every TCP connection with one greeting line and logs it on stdout.
func serve(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ExitOnError)
	port := flags.Int("port", 7077, "TCP port")
	greeting := flags.String("greeting", "hello", "the line each connection gets")
	_ = flags.Parse(args)
	listener, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		return err
	}
	fmt.Printf("serving on %s\n", listener.Addr())
	for {
		conn, err := listener.Accept()
		if err != nil {
			return err
		}
		fmt.Printf("connection from %s\n", conn.RemoteAddr())
		_, _ = fmt.Fprintln(conn, *greeting)
		_ = conn.Close()
	}
}

// dialLine connects to host:port and prints the first line it reads.
func dialLine(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: probe tcp HOST:PORT")
	}
	conn, err := net.DialTimeout("tcp", args[0], 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("connected to %s, no line: %w", conn.RemoteAddr(), err)
	}
	fmt.Printf("%s %s", conn.RemoteAddr(), line)
	return nil
}

func resolve(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: probe resolve NAME")
	}
	addrs, err := net.LookupHost(args[0])
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		fmt.Println(addr)
	}
	return nil
}

// kubeAPI asks the API server who the pod is (a SelfSubjectReview), over TLS verified with the
// service-account CA and authenticated with the service-account token, and prints the answer.
func kubeAPI(args []string) error {
	flags := flag.NewFlagSet("kube-api", flag.ExitOnError)
	server := flags.String("server", "https://kubernetes.default.svc", "API server URL")
	_ = flags.Parse(args)
	token, err := os.ReadFile(serviceAccount + "/token")
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(serviceAccount + "/ca.crt")
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("no certificate in ca.crt")
	}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
	}
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	request, err := http.NewRequest("POST", *server+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		strings.NewReader(body))
	if err != nil {
		return err
	}
	request.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	request.Header.Set("Content-Type", "application/json")
	response, err := client.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	answer, err := io.ReadAll(response.Body)
	if err != nil {
		return err
	}
	fmt.Println(string(answer))
	if response.StatusCode != http.StatusCreated && response.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", response.StatusCode)
	}
	return nil
}

// kafkaMetadata sends a Metadata request (v4: all topics) to a broker, prints the brokers it
// advertises and whether each advertised address accepts a connection from here.
func kafkaMetadata(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: probe kafka-metadata HOST:PORT")
	}
	conn, err := net.DialTimeout("tcp", args[0], 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var request bytes.Buffer
	clientID := "spark-dlq-probe"
	for _, field := range []any{int16(3), int16(4), int32(1), int16(len(clientID))} {
		_ = binary.Write(&request, binary.BigEndian, field)
	}
	request.WriteString(clientID)
	_ = binary.Write(&request, binary.BigEndian, int32(-1)) // topics: null means all
	request.WriteByte(0)                                    // allow_auto_topic_creation: false
	frame := binary.BigEndian.AppendUint32(nil, uint32(request.Len()))
	if _, err := conn.Write(append(frame, request.Bytes()...)); err != nil {
		return err
	}
	var size int32
	if err := binary.Read(conn, binary.BigEndian, &size); err != nil {
		return fmt.Errorf("no Metadata response: %w", err)
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(conn, payload); err != nil {
		return err
	}
	reader := bytes.NewReader(payload)
	var correlation, throttle, count int32
	for _, field := range []*int32{&correlation, &throttle, &count} {
		if err := binary.Read(reader, binary.BigEndian, field); err != nil {
			return fmt.Errorf("short Metadata response: %w", err)
		}
	}
	if correlation != 1 || count <= 0 {
		return fmt.Errorf("unexpected Metadata response: correlation %d, %d brokers", correlation, count)
	}
	unreachable := 0
	for i := int32(0); i < count; i++ {
		var nodeID, port int32
		var hostLen, rackLen int16
		_ = binary.Read(reader, binary.BigEndian, &nodeID)
		_ = binary.Read(reader, binary.BigEndian, &hostLen)
		host := make([]byte, max(hostLen, 0))
		_, _ = io.ReadFull(reader, host)
		_ = binary.Read(reader, binary.BigEndian, &port)
		if err := binary.Read(reader, binary.BigEndian, &rackLen); err != nil {
			return fmt.Errorf("short Metadata response: %w", err)
		}
		if rackLen > 0 {
			_, _ = reader.Seek(int64(rackLen), io.SeekCurrent)
		}
		advertised := net.JoinHostPort(string(host), fmt.Sprint(port))
		broker, err := net.DialTimeout("tcp", advertised, 5*time.Second)
		if err != nil {
			unreachable++
			fmt.Printf("broker %d %s unreachable: %v\n", nodeID, advertised, err)
			continue
		}
		_ = broker.Close()
		fmt.Printf("broker %d %s reachable\n", nodeID, advertised)
	}
	if unreachable > 0 {
		return fmt.Errorf("%d advertised broker address(es) unreachable", unreachable)
	}
	return nil
}
