# TLS for what runs on the host beside a real node (the real-node tests, deploy/local/cluster), as a platform
# team's private CA would make it: a CA, a server certificate for the node's address, and acquirer-sim behind
# TLS (a release image never sends the acquirer key in clear to another host). Sourced; needs common.sh.

# tls_ca_make DIR IP: DIR/ca.crt (a throwaway CA, two days) and DIR/server.crt, DIR/server.key for IP.
tls_ca_make() {
  local dir=$1 ip=$2
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 2 \
    -subj "/CN=charge-outbox test CA" 2>/dev/null || die "openssl could not make the test CA"
  openssl req -newkey rsa:2048 -nodes -keyout "$dir/server.key" -out "$dir/server.csr" -subj "/CN=$ip" 2>/dev/null ||
    die "openssl could not make the server key"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -out "$dir/server.crt" -days 2 -extfile <(printf 'subjectAltName=IP:%s\n' "$ip") 2>/dev/null ||
    die "openssl could not sign the server certificate"
}

# tls_front_start PID_FILE LOG IP PORT BACKEND_PORT DIR: TLS on IP:PORT with DIR's server certificate, each
# connection relayed to 127.0.0.1:BACKEND_PORT (socat, a process per connection).
tls_front_start() {
  local pid_file=$1 log=$2 ip=$3 port=$4 backend=$5 dir=$6
  start_daemon "$pid_file" "$log" socat -d \
    "OPENSSL-LISTEN:$port,bind=$ip,reuseaddr,fork,cert=$dir/server.crt,key=$dir/server.key,verify=0" \
    "TCP:127.0.0.1:$backend"
  local deadline=$((SECONDS + 10))
  until curl -sf --cacert "$dir/ca.crt" -o /dev/null "https://$ip:$port/healthz"; do
    ((SECONDS < deadline)) || die "the TLS front on $ip:$port does not answer (log: $log)"
    sleep 0.2
  done
}
